"""``fluid-hw launch --emit k8s``: the MPIJob validates against the Kubeflow MPI
operator's CRD schema (fixtures/kubeflow.org_mpijobs.yaml, v2beta1, from
kubeflow/mpi-operator manifests/base), with no field the schema does not know."""

import contextlib
import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from fluid_hw.cli.main import main

from .mpi_job import EXAMPLE, ROOT

jsonschema = pytest.importorskip("jsonschema")
yaml = pytest.importorskip("yaml")

CRD = Path(__file__).parent / "fixtures" / "kubeflow.org_mpijobs.yaml"


@pytest.fixture(scope="module")
def schema():
    crd = yaml.load(CRD.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    assert crd["kind"] == "CustomResourceDefinition" and crd["spec"]["group"] == "kubeflow.org"
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v2beta1")
    return version["schema"]["openAPIV3Schema"]


def _emit(*args):
    """``fluid-hw launch --emit k8s ARGS`` in this process (from the project's root)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        rc = main(["launch", "--emit", "k8s", *args])
    return SimpleNamespace(returncode=rc, stdout=out.getvalue(), stderr=err.getvalue())


def _unknown_fields(obj, schema, where="$"):
    """Fields the structural schema does not declare (the API server would prune them
    or, with strict field validation, refuse them)."""
    out = []
    if isinstance(obj, dict) and schema.get("type") == "object":
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for k, v in obj.items():
            if props is not None and k in props:
                out += _unknown_fields(v, props[k], f"{where}.{k}")
            elif isinstance(extra, dict):
                out += _unknown_fields(v, extra, f"{where}.{k}")
            elif props is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
                out.append(f"{where}.{k}")
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(obj):
            out += _unknown_fields(v, schema["items"], f"{where}[{i}]")
    return out


@pytest.mark.parametrize("mode,extra", [("sync", []), ("collective", ["--nodes", "1"]),
                                        ("async", ["--checkpoint-pvc", "ckpt"])])
def test_emitted_mpijob_validates_against_the_crd(schema, mode, extra, tmp_path):
    out = tmp_path / "job.json"
    r = _emit("--mode", mode, "--image", "registry.example/fluid-hw:0.1", "-o", str(out),
              *extra, str(EXAMPLE.relative_to(ROOT)), "--steps", "100")
    assert r.returncode == 0, r.stderr
    assert "kubectl apply -f" in r.stderr
    m = json.loads(out.read_text())
    jsonschema.validate(m, schema)
    assert _unknown_fields(m, schema) == []
    assert m["apiVersion"] == "kubeflow.org/v2beta1" and m["kind"] == "MPIJob"
    spec = m["spec"]
    nprocs = 2 if mode == "collective" else 4
    workers = spec["mpiReplicaSpecs"]["Worker"]["replicas"]
    assert workers * spec["slotsPerWorker"] >= nprocs
    launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["command"][:3] == ["mpiexec", "-n", str(nprocs)]
    assert "fluid_hw.backends.cluster.run_rank" in launcher["command"]
    env = {e["name"]: e["value"] for e in launcher["env"]}
    assert env["FLUID_HW_MODE"] == mode
    assert env["FLUID_HW_PSERVERS"] == ("0" if mode == "collective" else "2")
    assert "FLUID_HW_CLUSTER_KEY" not in env and env["FLUID_HW_CLUSTER_KEY_FILE"]


def test_a_broken_manifest_is_refused_by_the_schema(schema):
    """The check has teeth: the operator's enum and types are enforced."""
    r = _emit("--image", "x/y:1", str(EXAMPLE.relative_to(ROOT)))
    m = json.loads(r.stdout)
    m["spec"]["mpiImplementation"] = "LAM"
    with pytest.raises(jsonschema.ValidationError, match="LAM"):
        jsonschema.validate(m, schema)
    m["spec"]["mpiImplementation"] = "MPICH"
    m["spec"]["slotsPerWorker"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(m, schema)
    m["spec"]["slotsPerWorker"] = 1
    m["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containerz"] = []
    assert _unknown_fields(m, schema) == ["$.spec.mpiReplicaSpecs.Worker.template.spec.containerz"]


def test_emit_errors_name_the_fix():
    r = _emit(str(EXAMPLE))
    assert r.returncode == 2 and "--image" in r.stderr
    r = _emit("--image", "x/y:1", "--job-name", "Bad_Name", str(EXAMPLE))
    assert r.returncode == 2 and "lower-case" in r.stderr
    r = _emit("--image", "x/y:1", "--memory", "lots", str(EXAMPLE))
    assert r.returncode == 2 and "quantity" in r.stderr
