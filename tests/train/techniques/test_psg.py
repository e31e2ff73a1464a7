"""PSG: the Eq. (2) rule on hand-made tensors, its predictor statistic, its cost accounting, config checks, resume."""

import copy

import pytest
import torch

from codesign.energy import CostLedger, horowitz_45nm
from codesign.train.config import ConfigError, DataConfig, ModelConfig, OptimConfig, TrainConfig, config_from_dict
from codesign.train.layers import CountedLinear
from codesign.train.precision import FixedQuantizer, LayerPrecision
from codesign.train.techniques.psg import Config, Technique, fixed_format_of, predictive_sign
from codesign.train.trainer import Trainer


def test_rule_takes_the_predictor_sign_above_the_threshold_and_the_full_sign_below():
    # max|g_pred| = 0.5 and beta = 0.25, so the threshold is 0.125 (all values exact in binary)
    g_pred = torch.tensor([[0.5, -0.0625], [0.125, 0.0], [-0.25, 0.1]], dtype=torch.float64)
    g_full = torch.tensor([[1.0, 3.0], [-1.0, -2.0], [7.0, -5.0]], dtype=torch.float64)
    decision = predictive_sign(g_pred, g_full, 0.25)
    assert decision.threshold == 0.125
    # passes: 0.5, 0.125 (equal to the threshold counts), -0.25; falls back: -0.0625, 0.0, 0.1
    assert decision.predicted.tolist() == [[True, False], [True, False], [True, False]]
    # (1,0) and (2,0): the predictor's sign wins against a disagreeing full gradient;
    # (0,1), (1,1), (2,1): the full gradient's sign, whatever the predictor says
    assert decision.sign.tolist() == [[1.0, 1.0], [1.0, -1.0], [-1.0, -1.0]]


def test_rule_with_the_default_beta_and_an_all_zero_predictor():
    g_pred = torch.tensor([1.0, -0.06, 0.04, -0.049, 0.051])
    g_full = torch.tensor([-1.0, 1.0, -1.0, 1.0, -1.0])
    decision = predictive_sign(g_pred, g_full, 0.05)
    assert decision.predicted.tolist() == [True, True, False, False, True]
    assert decision.sign.tolist() == [1.0, -1.0, -1.0, 1.0, 1.0]
    # a zero predictor carries no sign: everything falls back, even though the threshold is 0
    zero = predictive_sign(torch.zeros(3), torch.tensor([2.0, -3.0, 0.0]), 0.05)
    assert not zero.predicted.any() and zero.sign.tolist() == [1.0, -1.0, 0.0]


def hand_layer(**config):
    """A 2->2 linear layer under PSG, a batch of 2 and an output gradient whose MSB slices are known by hand.

    x codes (8-bit, max|x| = 0.78125 so 7 fraction bits): [[96, 13], [-40, 100]] / 128;
      top 4 bits (code >> 4, floor): [[6, 0], [-3, 6]] in steps of 1/8
    g codes (16-bit, max|g| = 0.5 so 15 fraction bits): [[16384, 100], [-8192, -10]] / 32768;
      top 10 bits (code >> 6, floor): [[256, 1], [-128, -1]] in steps of 1/512
    """
    technique = Technique(Config(**config))
    layer = CountedLinear(2, 2, bias=False)
    layer.layer_name = "fc"
    layer.precision = technique.precision()
    layer.weight_grad_fn = technique.weight_grad
    technique.predicted["fc"] = technique.total["fc"] = 0
    layer.ledger = CostLedger()
    x = torch.tensor([[96.0, 13.0], [-40.0, 100.0]]) / 128
    g = torch.tensor([[16384.0, 100.0], [-8192.0, -10.0]]) / 32768
    return technique, layer, x, g


# g_pred[o, i] = sum_n g_msb[n, o] * x_msb[n, i], in units of 2**-14 (slice steps 1/8 x 1/512 = 2**-12, halves 2**-13)
PREDICTED = {
    # floor: x_msb = [[6, 0], [-3, 6]] / 8, g_msb = [[256, 1], [-128, -1]] / 512
    "floor": [[4 * (256 * 6 + 128 * 3), 4 * (-128 * 6)], [4 * (6 + 3), 4 * (-6)]],
    # midpoint: x_msb = [[13, 1], [-5, 13]] / 16, g_msb = [[513, 3], [-255, -1]] / 1024
    "midpoint": [[513 * 13 + 255 * 5, 513 - 255 * 13], [3 * 13 + 5, 3 - 13]],
}


@pytest.mark.parametrize("reading", ["floor", "midpoint"])
def test_predictor_is_the_weight_gradient_of_the_msb_slices(reading):
    technique, layer, x, g = hand_layer(msb_reconstruction=reading)
    xq, gq = layer.precision.activation(x), layer.precision.grad(g)
    assert torch.equal(xq, x) and torch.equal(gq, g)  # the codes above are exact
    predicted, full = technique.predict(layer, xq, gq)
    assert predicted.tolist() == (torch.tensor(PREDICTED[reading], dtype=torch.float64) / 2**14).tolist()
    assert full.tolist() == (g.double().t() @ x.double()).tolist()


@pytest.mark.parametrize("reading", ["floor", "midpoint"])
def test_hook_predicts_from_msb_slices_and_falls_back_to_the_full_sign(reading):
    # row 0 of g_pred is far above 0.05 * max|g_pred|, row 1 far below, for both readings:
    # row 0 takes the predictor's signs (+, -); row 1 falls back to the full gradient,
    # g_full row 1 = [100*96 + 10*40, 100*13 - 10*100] / 2**22 = [+, +], where the predictor said (+, -)
    technique, layer, x, g = hand_layer(msb_reconstruction=reading)
    layer(x).backward(g)
    assert layer.weight.grad.tolist() == [[1.0, -1.0], [1.0, 1.0]]
    assert technique.predicted == {"fc": 2} and technique.total == {"fc": 4}
    assert technique.report()["predicted_fraction"]["per_layer"] == {"fc": 0.5}


@pytest.mark.parametrize("reading, corrections", [("floor", 0), ("midpoint", 4 + 4)])
def test_cost_is_10x4_for_every_weight_plus_the_remaining_partial_products_for_the_fallback_only(reading, corrections):
    technique, layer, x, g = hand_layer(msb_reconstruction=reading)
    layer(x).backward(g)
    weight_grad = {(r.arith, r.bits_a, r.bits_b): r.macs for r in layer.ledger.records() if r.phase == "weight_grad"}
    # 4 weights x 2 samples = 8 predictor MACs (10-bit grad x 4-bit activation), plus for the midpoint reading
    # the shared sums: sum_n x_msb[n, i] (2 x 2) and sum_n g_msb[n, o] (2 x 2);
    # 2 fall-back weights x 2 samples complete the 16x8 product from the 10x4 one already made: g_m x x_l at
    # 10x4 bits and g_l x x at 6x8 bits (10 x 4 + 6 x 8 = 16 x 8 - 10 x 4 bit-products), never a second full MAC
    assert weight_grad == {("int", 10, 4): 8 + corrections + 4, ("int", 6, 8): 4}
    bitops = layer.ledger.summary(horowitz_45nm())["by_phase"]["weight_grad"]["bitops"]
    assert bitops == (8 + corrections) * 10 * 4 + 4 * (16 * 8 - 10 * 4)  # a fall-back weight costs 16x8 in all
    forward = {(r.arith, r.bits_a, r.bits_b): r.macs for r in layer.ledger.records() if r.phase == "forward"}
    assert forward == {("int", 8, 8): 8}
    # DRAM: MSB planes 4 x 10 + 4 x 4 bits; LSB planes of output channel 1 (2 x 6 bits) and both input
    # channels (2 x 2 x 4 bits); a 2-bit sign per weight
    dram_bits = 40 + 16 + 12 + 16 + 8
    table = horowitz_45nm()
    dram_pj = layer.ledger.summary(table)["by_phase"]["weight_grad"]["dram_pj"]
    assert dram_pj == pytest.approx(dram_bits / 64 * table.dram_64b)


def test_dynamic_format_is_recovered_even_when_a_negative_maximum_rounds_out_of_range():
    quantizer = FixedQuantizer(8)
    q = quantizer(torch.tensor([-0.999, 0.305]))  # -0.999 rounds to code -128 at 7 fraction bits: -1.0
    assert q.tolist()[0] == -1.0
    assert fixed_format_of(quantizer, q).frac_bits == 7
    assert fixed_format_of(quantizer, quantizer(torch.tensor([0.6, -0.2]))).frac_bits == 7
    assert fixed_format_of(FixedQuantizer(8, frac_bits=3), torch.tensor([0.5])).frac_bits == 3


SMALL = TrainConfig(seed=3, data=DataConfig(name="synthetic", synthetic_samples=200),
                    model=ModelConfig(name="mlp", hidden=(32,)), optim=OptimConfig(epochs=3, batch_size=30, lr=0.01),
                    techniques={"psg": Config(swa=True, swa_epochs=2)})


@pytest.fixture(scope="module")
def reference_run():
    """One uninterrupted PSG+SWA run, shared by the statistic and the resume tests."""
    trainer = Trainer(SMALL, progress=False)
    for layer in trainer.techniques[0].layers:
        assert layer.precision == LayerPrecision(activation=FixedQuantizer(8), weight=FixedQuantizer(8),
                                                 grad=FixedQuantizer(16))
        assert layer.weight_grad_fn == trainer.techniques[0].weight_grad
    return trainer, trainer.fit()


def test_run_statistic_matches_the_ledger_and_precisions_are_set(reference_run):
    trainer, result = copy.deepcopy(reference_run)
    report = result.techniques["psg"]["predicted_fraction"]
    # MLP: each weight's full dot product has one term per sample; 150 samples x 3 epochs were trained,
    # so a layer's fall-back share is its 6x8-bit MACs (the grad-LSB x activation partial products that only a
    # fall-back weight computes) over (450 x its weights)
    weights = {layer.layer_name: layer.weight.numel() for layer in trainer.techniques[0].layers}
    for layer, fraction in report["per_layer"].items():
        fallback_macs = sum(r.macs for r in trainer.ledger.records()
                            if r.layer == layer and r.phase == "weight_grad" and (r.bits_a, r.bits_b) == (6, 8))
        assert fraction == pytest.approx(1 - fallback_macs / (450 * weights[layer]), abs=1e-12)
        assert 0 < fraction <= 1
    assert len(report["per_epoch"]) == 3 and report["min_epoch"] == min(report["per_epoch"])
    swa = result.techniques["psg"]["swa"]
    assert swa["averaged_epochs"] == 2 and result.test_accuracy == swa["test_accuracy_swa"]


@pytest.mark.parametrize("field, value", [("beta", 0.0), ("beta", 1.5), ("beta", -0.05), ("activation_bits", 1),
                                          ("grad_bits", 40), ("weight_bits", 8.0), ("activation_msb_bits", 9),
                                          ("grad_msb_bits", 1), ("grad_msb_bits", 17), ("swa_epochs", 0),
                                          ("msb_reconstruction", "round"), ("swa", 1)])
def test_bad_config_is_refused_with_the_field_named(field, value):
    with pytest.raises(ConfigError, match=f"techniques.psg.{field}"):
        TrainConfig(techniques={"psg": Config(**{field: value})})


def test_beta_of_one_is_allowed_and_toml_errors_name_the_field():
    TrainConfig(techniques={"psg": Config(beta=1.0)})
    with pytest.raises(ConfigError, match="techniques.psg.beta"):
        config_from_dict({"techniques": {"psg": {"beta": 2}}})
    with pytest.raises(ConfigError, match="techniques.psg.swa_epochs"):
        Trainer(SMALL.replace(techniques={"psg": Config(swa=True, swa_epochs=4)}), progress=False)


@pytest.mark.parametrize("stop_after", [3, 11])  # inside epoch 0, and inside the SWA window (epoch 2)
def test_killed_and_resumed_run_ends_bit_identical(tmp_path, stop_after, reference_run):
    uninterrupted, expected = copy.deepcopy(reference_run)
    checkpoint = tmp_path / "psg.pt"
    assert Trainer(SMALL, progress=False).fit(checkpoint=checkpoint, stop_after_steps=stop_after) is None
    resumed = Trainer(SMALL, progress=False)
    result = resumed.fit(checkpoint=checkpoint, resume=True)
    assert result.resumed_from_step == stop_after
    for (name, a), b in zip(uninterrupted.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name
    # the work done is identical to the MAC and the bit; energies are float sums whose order the ledger
    # takes from its insertion history (sorted after a reload), so they agree to rounding only
    assert resumed.ledger.state_dict() == uninterrupted.ledger.state_dict()
    assert result.cost["total"]["energy_pj"] == pytest.approx(expected.cost["total"]["energy_pj"], rel=1e-12)
    for got, want in zip(result.history, expected.history, strict=True):
        assert got.pop("energy_pj") == pytest.approx(want.pop("energy_pj"), rel=1e-12)
        assert got == want
    assert result.techniques == expected.techniques


def test_psg_with_tt_layers_is_refused_by_name_before_training(tmp_path, capsys):
    """psg hooks the weight gradients of dense layers; a TT MLP has none (it was an AttributeError traceback)."""
    from codesign.cli import main

    config = tmp_path / "psg_tt.toml"
    config.write_text('[model]\nname = "mlp"\nhidden = [8]\n[optim]\nepochs = 1\n[techniques.psg]\n[techniques.tt]\n')
    assert main(["train", str(config), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "techniques.psg: cannot be combined with tt" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()
