"""Weight averaging: a model's weights averaged over the states it passed through.

The ranking of a task's best programs moves from epoch to epoch, and the mean of the last epochs'
weights sits in the middle of those moves, so the result depends less on where training stopped.
"""

from __future__ import annotations

__all__ = ["LastEpochsAverage", "WeightAverage"]


class WeightAverage:
    """Running mean of a model's floating-point weights (kept in float64)."""

    def __init__(self):
        self.sum: dict | None = None
        self.count = 0

    def add(self, model):
        sd = model.state_dict()
        if self.sum is None:
            self.sum = {k: v.detach().double().clone() for k, v in sd.items() if v.is_floating_point()}
        else:
            for k in self.sum:
                self.sum[k] += sd[k].detach().double()
        self.count += 1

    def load_into(self, model):
        sd = model.state_dict()
        model.load_state_dict({**sd, **{k: (v / self.count).to(sd[k].dtype) for k, v in self.sum.items()}})


class LastEpochsAverage(WeightAverage):
    """The mean of a model's weights after each of the last `fraction` of `epochs` epochs (none when 0)."""

    def __init__(self, epochs: int, fraction: float):
        super().__init__()
        self.first = epochs - min(epochs, max(1, round(fraction * epochs))) + 1 if fraction > 0 else epochs + 1

    def after_epoch(self, epoch: int, model):
        """epoch: 1-based, just finished."""
        if epoch >= self.first:
            self.add(model)

    def finish(self, model):
        """Loads the mean into the model, if any state was taken."""
        if self.count:
            self.load_into(model)
