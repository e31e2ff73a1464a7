"""What the loops share: the set-up's bounds and the data a loop fits, checked at their edges; a staged batch."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from codesign.loops.common import (HwTrainError, StagedBatch, check_fit_data, cross_entropy_of, softmax_cross_entropy,
                                   softmax_gradient)


def _data(y_train, *, classes=10, x_dtype=np.float32, features=4):
    x = np.zeros((len(y_train), features), x_dtype)
    return SimpleNamespace(train_x=x, train_y=np.asarray(y_train), test_x=x[:2], test_y=np.asarray(y_train)[:2],
                           classes=classes)


def test_labels_up_to_the_last_output_are_taken_and_one_more_is_refused():
    check_fit_data(_data([0, 9, 3]), features=4, classes=10)  # 9: the last of ten outputs
    with pytest.raises(HwTrainError, match=r"data.train_y: labels must be integers in 0..9 \(got int64, 0..10\)"):
        check_fit_data(_data([0, 10, 3], classes=10), features=4, classes=10)
    with pytest.raises(HwTrainError, match="data.classes is 11; the network has 10 outputs"):
        check_fit_data(_data([0, 1], classes=11), features=4, classes=10)
    with pytest.raises(HwTrainError, match=r"data.train_y: labels must be integers"):
        check_fit_data(_data([-1, 1]), features=4, classes=10)
    with pytest.raises(HwTrainError, match="samples of 4 values"):
        check_fit_data(_data([0, 1], features=5), features=4, classes=10)


def test_the_loss_and_its_gradient_do_not_depend_on_the_logits_memory_order():
    """A TT layer's output comes out row- or column-major as its contractions fall; the loss and gradient of the
    same logits must be the same bits either way (a row's sum taken in another order differs in the last bit:
    found so where a list step's logits were row-major and the loop's column-major)."""
    rng = np.random.default_rng(0)
    differs = 0
    for _ in range(200):
        logits = rng.normal(0, 4, (8, 10))
        y = rng.integers(0, 10, 8)
        rows, columns = softmax_cross_entropy(logits, y), softmax_cross_entropy(np.asfortranarray(logits), y)
        assert rows[0] == columns[0] and rows[1].tobytes() == columns[1].tobytes()
        exps = np.exp(logits - logits.max(axis=1, keepdims=True))
        differs += int(exps.sum(axis=1).tobytes() != np.asfortranarray(exps).sum(axis=1).tobytes())
    assert differs > 0, "NumPy sums rows of either order alike here: the test would not see the difference"


def test_the_loss_and_its_gradient_are_the_textbook_expression_bit_for_bit():
    """The in-place gradient and the loss taken apart (a list step takes the loss beside its backward) against the
    expression written out, over batch sizes, class counts and logit scales (exp underflowing to subnormals and
    0 at the largest), and a loss taken from a gradient's labels alone."""
    rng = np.random.default_rng(1)
    for trial in range(400):
        n, classes = int(rng.integers(1, 130)), int(rng.integers(2, 20))
        logits = rng.normal(size=(n, classes)) * rng.choice([1e-3, 1.0, 30.0, 800.0])
        y = rng.integers(0, classes, n)
        exps = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs = exps / exps.sum(axis=1, keepdims=True)
        loss = float(-np.mean(np.log(np.maximum(probs[np.arange(n), y], np.finfo(np.float64).tiny))))
        probs[np.arange(n), y] -= 1.0
        given = softmax_cross_entropy(logits if trial % 3 else np.asfortranarray(logits), y)
        assert given[0] == loss and given[1].tobytes() == (probs / n).tobytes()
        grad, chosen = softmax_gradient(logits, y)
        assert grad.tobytes() == given[1].tobytes() and cross_entropy_of(chosen) == loss
        assert cross_entropy_of(chosen) == loss  # chosen is not overwritten: a loss taken twice is the same
    logits = rng.normal(size=(3, 4))
    for labels in ([0, 4, 0], [-1, 0, 0]):  # past the last class, or before the first: not a neighbour's entry
        with pytest.raises(ValueError):
            softmax_cross_entropy(logits, np.array(labels))
    with pytest.raises(ValueError):
        softmax_cross_entropy(np.zeros((0, 4)), np.zeros(0, np.int64))


def test_a_staged_batch_matches_only_itself_bit_for_bit_under_its_key():
    x = np.array([[0.0, 1.5], [2.0, -3.25]])
    staged = StagedBatch(x=x.copy(), key=(5, 1))
    assert staged.matches(x, (5, 1)) and staged.matches(x.astype(np.float32), (5, 1))  # float32 widens exactly
    assert not staged.matches(x, (5, 0)) and not staged.matches(x, (6, 1))
    signed = x.copy()
    signed[0, 0] = -0.0  # equal in value, not in bits
    assert not staged.matches(signed, (5, 1))
    assert not staged.matches(x[:1], (5, 1)) and not staged.matches(x.T, (5, 1))
    nan = x.copy()
    nan[1, 1] = np.nan
    assert not staged.matches(nan, (5, 1))
    # staged in float32 (a TT batch): compared as the step converts a batch, so 0.1 in float64 is its float32
    narrow = StagedBatch(x=np.array([[0.1, -0.0]], np.float32), key=())
    assert narrow.matches(np.array([[0.1, -0.0]])) and not narrow.matches(np.array([[0.1, 0.0]]))
