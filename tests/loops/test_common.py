"""What the loops share: the set-up's bounds and the data a loop fits, checked at their edges."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from codesign.loops.common import HwTrainError, check_fit_data


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
