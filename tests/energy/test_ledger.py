import pytest

from codesign.energy import CostLedger, horowitz_45nm


def test_summary_prices_each_kind_and_phase():
    ledger = CostLedger()
    ledger.add_macs("conv", "forward", 1000, bits_a=8, bits_b=8)
    ledger.add_macs("conv", "error", 500, bits_a=16, bits_b=8)
    ledger.add_macs("fc", "weight_grad", 100, bits_a=32, bits_b=32, arith="fp32")
    ledger.add_dram("conv", "forward", 6400)
    table = horowitz_45nm()
    summary = ledger.summary(table)
    forward = summary["by_phase"]["forward"]
    assert forward["macs"] == 1000 and forward["flops"] == 2000 and forward["bitops"] == 64_000
    assert forward["compute_pj"] == pytest.approx(1000 * (0.2 + table.int_add(16)))
    assert forward["buffer_pj"] == pytest.approx(1000 * 16 / 64 * 10)
    assert forward["dram_pj"] == pytest.approx(100 * 1300)
    assert summary["by_phase"]["weight_grad"]["compute_pj"] == pytest.approx(100 * 4.6)
    assert summary["total"]["macs"] == 1600
    assert summary["total"]["energy_pj"] == pytest.approx(sum(p["energy_pj"] for p in summary["by_phase"].values()))
    assert set(summary["by_layer"]) == {"conv", "fc"}


def test_fb_float_macs_need_a_price_and_take_sign_exponent_and_fb_bits():
    ledger = CostLedger()
    ledger.add_macs("conv", "forward", 10, bits_a=10, bits_b=10, arith="fp", exp_bits=8)
    with pytest.raises(ValueError, match="exponent width"):
        ledger.add_macs("conv", "forward", 10, bits_a=10, bits_b=10, arith="fp")
    with pytest.raises(ValueError, match="exponent width"):
        ledger.add_macs("conv", "forward", 10, bits_a=8, bits_b=8, arith="int", exp_bits=8)
    with pytest.raises(ValueError, match="fp_mac_pj"):
        ledger.summary(horowitz_45nm())
    summary = ledger.summary(horowitz_45nm(), fp_mac_pj=lambda fb: 0.1 * fb)
    assert summary["total"]["compute_pj"] == pytest.approx(10 * 1.0)
    assert summary["total"]["bitops"] == 10 * 19 * 19
    narrow = CostLedger()
    narrow.add_macs("conv", "forward", 10, bits_a=10, bits_b=10, arith="fp", exp_bits=5)
    assert narrow.summary(horowitz_45nm(), fp_mac_pj=lambda fb: 0.1 * fb)["total"]["bitops"] == 10 * 16 * 16


def test_state_round_trip_merge_and_validation():
    ledger = CostLedger()
    ledger.add_macs("a", "forward", 3, bits_a=8, bits_b=8)
    ledger.add_dram("a", "forward", 64)
    copy = CostLedger()
    copy.load_state_dict(ledger.state_dict())
    assert copy.records() == ledger.records()
    copy.merge(ledger)
    assert copy.total_macs() == 6
    with pytest.raises(ValueError, match="unknown phase"):
        ledger.add_macs("a", "backward", 1, bits_a=8, bits_b=8)
    with pytest.raises(ValueError, match="unknown arithmetic"):
        ledger.add_macs("a", "forward", 1, bits_a=8, bits_b=8, arith="bf16")
