"""``ForwardBackwardInput`` (official module ``tinker.types.forward_backward_input``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from tinker_lite._errors import InvalidInputError

from ._common import _check_float, _check_mapping, _set
from .datum import Datum, check_positions
from .loss_fn_type import check_loss_fn


def _convert_data(value: Iterable[Datum]) -> list[Datum]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidInputError("data", f"must be a list of Datum, got {type(value).__name__}")
    data = list(value)
    for index, datum in enumerate(data):
        if not isinstance(datum, Datum):
            raise InvalidInputError(
                f"data[{index}]",
                f"must be a Datum, got {type(datum).__name__}",
                "build it with Datum(model_input=..., loss_fn_inputs=...)",
            )
        # Again per datum, naming its index: loss_fn_inputs is a dict that may have changed.
        check_positions(datum, f"data[{index}].", sending=True)
        if datum.model_input_spans is not None:
            # Neither encoder carries provenance yet: refuse rather than drop it silently.
            raise InvalidInputError(
                f"data[{index}].model_input_spans",
                "provenance spans cannot be sent by this release of tinker_lite",
                "send the datum without provenance (build it without with_provenance)",
            )
    return data


def _check_loss_fn_config(value: object) -> dict[str, float | str] | None:
    if value is None:
        return None
    config = _check_mapping("loss_fn_config", value)
    for key, item in config.items():
        if isinstance(item, str):
            continue
        config[key] = _check_float(
            f"loss_fn_config[{key!r}]", item, "values are numbers (or strings)"
        )
    return config


@attrs.frozen(kw_only=True)
class ForwardBackwardInput:
    """The data, loss function and loss options of a forward / forward_backward call."""

    data: list[Datum] = attrs.field(converter=_convert_data)
    loss_fn: str
    loss_fn_config: dict[str, float | str] | None = None

    def __attrs_post_init__(self) -> None:
        if not self.data:
            raise InvalidInputError("data", "is empty", "pass at least one Datum")
        _set(self, "loss_fn", check_loss_fn(self.loss_fn))
        _set(self, "loss_fn_config", _check_loss_fn_config(self.loss_fn_config))
