"""`fluid-hw program BUILD_DIR` (openFPGALoader is not installed here: its error path
and the command it would run)."""

import json
import sys

import pytest

from fluid_hw.cli.main import main


@pytest.fixture
def no_loader(monkeypatch, tmp_path):
    monkeypatch.delenv("FLUID_HW_OPENFPGALOADER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "nothing" / "python"))


def _build_dir(tmp_path, board, name):
    build = tmp_path / "build"
    build.mkdir()
    (build / name).write_bytes(b"\xff" * 64)
    (build / "bitstream.json").write_text(json.dumps({"board": board,
                                                      "bitstream": f"/elsewhere/{name}"}))
    return build


def test_missing_openfpgaloader_is_a_clear_error(tmp_path, capsys, no_loader):
    build = _build_dir(tmp_path, "ulx3s-85f", "board_top.bit")
    assert main(["program", str(build)]) == 2
    err = capsys.readouterr().err
    assert "openFPGALoader" in err and "apt install openfpgaloader" in err
    assert "FLUID_HW_OPENFPGALOADER" in err


@pytest.mark.parametrize(("board", "file", "args"), [
    ("ulx3s-25f", "board_top.bit", "-b ulx3s"),
    ("icebreaker", "board_top.bin", "-b ice40_generic"),
])
def test_dry_run_shows_the_command(tmp_path, capsys, no_loader, board, file, args):
    build = _build_dir(tmp_path, board, file)
    assert main(["program", str(build), "--dry-run", "--flash"]) == 0
    out = capsys.readouterr().out
    assert f"openFPGALoader {args} -f {build / file}" in out


def test_report_json_target_and_errors(tmp_path, capsys, no_loader):
    build = tmp_path / "b"
    build.mkdir()
    assert main(["program", str(build)]) == 2
    assert "build the bitstream first" in capsys.readouterr().err
    (build / "report.json").write_text(json.dumps({"target": "up5k",
                                                   "bitstream": {"file": "x.bin"}}))
    assert main(["program", str(build), "--dry-run"]) == 2
    assert "x.bin does not exist" in capsys.readouterr().err
    (build / "x.bin").write_bytes(b"\0")
    assert main(["program", str(build), "--dry-run"]) == 0
    assert "-b ice40_generic" in capsys.readouterr().out
    assert main(["program", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
