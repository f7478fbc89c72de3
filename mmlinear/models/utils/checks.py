"""Validation helpers that turn bad options into errors naming the allowed values."""
from typing import Dict, Iterable, Mapping, Sequence, Tuple, Union


def check_choice(name: str, value: object, allowed: Iterable) -> None:
    """Raise a ValueError naming the allowed values when ``value`` is not one of them.

    Args:
        name (str): What the value is, as the user would call it (``'attn_type'``).
        value: The value given.
        allowed (Iterable): The valid values.
    """
    allowed = tuple(allowed)
    if value not in allowed:
        raise ValueError(f'unknown {name} {value!r}; allowed: {", ".join(map(repr, allowed))}')


def normalize_indices(name: str, indices: Union[int, Sequence[int]],
                      length: int) -> Tuple[int, ...]:
    """Turn (possibly negative) layer indices into sorted non-negative ones.

    Backbones return their outputs in layer order, so the result is sorted; a layer named
    twice (say 1 and -1 of a 2-layer model) is an error rather than one output fewer.

    Args:
        name (str): The option name for the error message (``'out_indices'``).
        indices (int | Sequence[int]): Indices in ``[-length, length)``.
        length (int): Number of layers.

    Returns:
        tuple[int, ...]: Distinct indices in ``[0, length)``, ascending.

    Raises:
        ValueError: If an index is out of range, not an integer, or repeats a layer.
    """
    if isinstance(indices, int):
        indices = (indices, )
    result = []
    for index in indices:
        if (isinstance(index, bool) or not isinstance(index, int) or not -length <= index < length):
            raise ValueError(f'{name} must hold integers in [{-length}, {length - 1}] '
                             f'(the model has {length} layers), got {tuple(indices)}')
        if index % length in result:
            raise ValueError(f'{name} names layer {index % length} twice: {tuple(indices)}')
        result.append(index % length)
    return tuple(sorted(result))


def check_frozen_stages(frozen_stages: int, num_layers: int) -> int:
    """Validate ``frozen_stages`` (-1: nothing frozen, 0: the patch embedding, i: also the
    first i layers).

    Args:
        frozen_stages (int): The value given.
        num_layers (int): Number of layers of the backbone.

    Returns:
        int: ``frozen_stages``.

    Raises:
        ValueError: If it lies outside ``[-1, num_layers]``.
    """
    if not -1 <= frozen_stages <= num_layers:
        raise ValueError(f'frozen_stages must lie in [-1, {num_layers}], got {frozen_stages}')
    return frozen_stages


def resolve_arch(arch: Union[str, dict], arch_zoo: Mapping[str, dict],
                 required: Iterable[str]) -> Dict[str, int]:
    """Settings of a preset name (case-insensitive) or of a custom arch dict.

    Args:
        arch (str | dict): A key of ``arch_zoo`` or a dict with exactly the ``required`` keys.
        arch_zoo (Mapping[str, dict]): The backbone's presets.
        required (Iterable[str]): The keys a custom arch dict must have.

    Returns:
        dict: A copy of the settings.

    Raises:
        ValueError: Naming the presets, or the required keys of a custom dict.
    """
    if isinstance(arch, str):
        check_choice('arch', arch.lower(), arch_zoo)
        return dict(arch_zoo[arch.lower()])
    required = set(required)
    if not isinstance(arch, dict) or set(arch) != required:
        raise ValueError(f'a custom arch must be a dict with exactly the keys '
                         f'{sorted(required)}, got {arch!r}')
    return dict(arch)
