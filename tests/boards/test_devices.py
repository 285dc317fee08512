"""Board and device data, the registry, constraints, the budget check (fast)."""

import pytest

from fluid_hw.boards import (
    ResourceBudgetError,
    all_boards,
    all_devices,
    check_budget,
    constraints_text,
    get_board,
    get_device,
    get_family,
)
from fluid_hw.errors import FluidError, UnknownNameError


def test_registry_names_and_aliases():
    assert set(all_boards()) == {"ulx3s-25f", "ulx3s-45f", "ulx3s-85f", "icebreaker"}
    assert get_board("ULX3S-85F") is get_board("lfe5u-85f")
    assert get_board("up5k").name == "icebreaker"
    assert get_board(get_board("icebreaker")).device.name == "iCE40UP5K"
    assert get_device("lfe5u-25f").name == "LFE5U-25F"


def test_unknown_names_list_the_known_ones():
    with pytest.raises(UnknownNameError) as ei:
        get_board("de10-nano")
    msg = str(ei.value)
    assert "de10-nano" in msg and "ulx3s-25f" in msg and "icebreaker" in msg
    with pytest.raises(UnknownNameError, match="LFE5U-85F"):
        get_device("xc7a35t")
    with pytest.raises(UnknownNameError, match="ecp5, ice40"):
        get_family("gowin")
    with pytest.raises(UnknownNameError, match="uart_tx"):
        get_board("icebreaker").pin("hdmi")


@pytest.mark.parametrize(("device", "dsp", "bram", "lut"), [
    ("LFE5U-25F", 28, 56, 24288),
    ("LFE5U-45F", 72, 108, 43848),
    ("LFE5U-85F", 156, 208, 83640),
    ("iCE40UP5K", 8, 30, 5280),
])
def test_device_resources(device, dsp, bram, lut):
    d = get_device(device)
    assert (d.resources["dsp"], d.resources["bram"], d.resources["lut"]) == (dsp, bram, lut)


def test_device_details():
    up5k = get_device("iCE40UP5K")
    assert up5k.resources["spram"] == 4 and up5k.spram_bits == 256 * 1024
    assert up5k.bram_bits == 4096 and up5k.package == "sg48"
    assert up5k.nextpnr_device == ("--up5k",)
    for size in ("25", "45", "85"):
        d = get_device(f"LFE5U-{size}F")
        assert d.nextpnr_device == (f"--{size}k",)
        assert (d.package, d.speed, d.bram_bits) == ("CABGA381", "6", 18 * 1024)
        assert d.describe("dsp") == "MULT18X18D multipliers"
    assert set(all_devices()) == {"LFE5U-25F", "LFE5U-45F", "LFE5U-85F", "iCE40UP5K"}


def test_board_pins():
    ulx3s = get_board("ulx3s-25f")
    assert ulx3s.clock_mhz == 25.0 and ulx3s.programmer_args == ("-b", "ulx3s")
    assert {r: p.site for r, p in ulx3s.pins.items()} == {
        "clk": "G2", "uart_tx": "L4", "uart_rx": "M1", "led": "B2", "reset": "R1"}
    ice = get_board("icebreaker")
    assert ice.clock_mhz == 12.0 and ice.programmer_args == ("-b", "ice40_generic")
    assert {r: p.site for r, p in ice.pins.items()} == {
        "clk": "35", "uart_tx": "9", "uart_rx": "6", "led": "37", "reset": "10"}
    assert ice.pin("led").invert and ice.pin("reset").invert
    assert ice.pin("uart_tx").direction == "o" and ice.pin("uart_rx").direction == "i"


def test_family_templates():
    ecp5 = get_family("ecp5")
    args = " ".join(ecp5.pnr_args)
    assert ecp5.default_placer == "static" and "{placer}" in ecp5.pnr_args
    for flag in ("--placer", "--timing-allow-fail", "--report", "--lpf", "--textcfg",
                 "--speed", "--package", "--freq"):
        assert flag in args
    assert ecp5.synth_commands[0].startswith("synth_ecp5 -top {top}")
    ice40 = get_family("ice40")
    assert "-dsp" in ice40.synth_commands[0]
    assert "--pcf" in ice40.pnr_args and "--asc" in ice40.pnr_args
    assert (ecp5.pack_tool, ice40.pack_tool) == ("ecppack", "icepack")


def test_count_resources_from_yosys_cells():
    ecp5 = get_family("ecp5")
    got = ecp5.count_resources({"LUT4": 10, "CCU2C": 4, "TRELLIS_FF": 7, "MULT18X18D": 3,
                                "DP16KD": 2, "EHXPLLL": 1, "PFUMX": 5})
    assert got == {"lut": 18, "carry": 4, "ff": 7, "dsp": 3, "bram": 2, "pll": 1}
    ice40 = get_family("ice40")
    got = ice40.count_resources({"SB_LUT4": 9, "SB_DFFSR": 3, "SB_DFFE": 2, "SB_MAC16": 1,
                                 "SB_RAM40_4K": 2, "SB_SPRAM256KA": 1, "SB_PLL40_PAD": 1,
                                 "SB_CARRY": 4})
    assert got == {"lut": 9, "ff": 5, "dsp": 1, "bram": 2, "spram": 1, "pll": 1, "carry": 4}


def test_budget_error_names_resource_and_excess():
    dev = get_device("LFE5U-25F")
    check_budget(dev, {"dsp": 28, "bram": 56, "lut": 100})  # exactly full is fine
    with pytest.raises(ResourceBudgetError) as ei:
        check_budget(dev, {"dsp": 40, "bram": 3}, design="mlp")
    msg = str(ei.value)
    assert "40 MULT18X18D multipliers" in msg and "LFE5U-25F has 28" in msg
    assert "12 over" in msg and "143%" in msg
    assert "folding" in msg and "ulx3s-45f" in msg and "ulx3s-85f" in msg
    assert "bram" not in msg.split("Fix")[0].lower().replace("dp16kd", "")
    assert isinstance(ei.value, FluidError)
    with pytest.raises(ResourceBudgetError, match=r"9 SB_MAC16 DSPs.*has 8 \(1 over"):
        check_budget(get_device("iCE40UP5K"), {"dsp": 9})


def test_lpf_constraints():
    b = get_board("ulx3s-85f")
    pins = {p.name: p for p in b.pins.values()}
    text = constraints_text(b, pins, {"clk25": 25.0})
    assert 'LOCATE COMP "clk25" SITE "G2";' in text
    assert 'IOBUF PORT "uart_rx" IO_TYPE=LVCMOS33 PULLMODE=UP;' in text
    assert 'FREQUENCY PORT "clk25" 25.000000 MHZ;' in text


def test_pcf_constraints():
    b = get_board("icebreaker")
    pins = {p.name: p for p in b.pins.values()}
    text = constraints_text(b, pins, {"clk12": 12.0})
    assert "set_io -nowarn clk12 35" in text
    assert "set_io -nowarn -pullup yes uart_rx 6" in text
    assert "set_frequency clk12 12.000000" in text
