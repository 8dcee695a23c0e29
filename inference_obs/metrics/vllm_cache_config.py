"""The KV pool's capacity in tokens, from the labels of ``vllm:cache_config_info``.

vLLM exposes its cache configuration as labels of an info gauge. The pool's
capacity is ``num_gpu_blocks x block_size`` for a model with one kind of
attention; a hybrid model (full attention beside sliding-window, Mamba or
compressor state) has KV groups of different block sizes sharing one block
pool, ``block_size`` is then the smallest of them, and the product is not the
tokens the pool holds. vLLM >= 0.33 exports its own figure,
``kv_cache_size_tokens``: it is preferred wherever it is a number.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["EXPORTED", "FROM_BLOCKS", "kv_capacity_tokens"]

#: How a capacity was read: vLLM's own ``kv_cache_size_tokens`` label.
EXPORTED = "kv_cache_size_tokens (label)"
#: How a capacity was read: the product of two labels.
FROM_BLOCKS = "num_gpu_blocks x block_size (labels)"


def kv_capacity_tokens(labels: Mapping[str, str]) -> tuple[int, str] | None:
    """One engine's KV capacity, tokens, and how it was read (:data:`EXPORTED` or
    :data:`FROM_BLOCKS`); None when the labels give neither.

    vLLM writes an unset field as the text ``None``: such a label is absent, not 0.

    >>> kv_capacity_tokens({"num_gpu_blocks": "11560", "block_size": "16"})
    (184960, 'num_gpu_blocks x block_size (labels)')
    >>> kv_capacity_tokens({"kv_cache_size_tokens": "286458", "block_size": "4"})
    (286458, 'kv_cache_size_tokens (label)')
    >>> kv_capacity_tokens({"kv_cache_size_tokens": "None", "block_size": "16"}) is None
    True
    """
    exported = _integer(labels.get("kv_cache_size_tokens"))
    if exported is not None:
        return exported, EXPORTED
    blocks, size = _integer(labels.get("num_gpu_blocks")), _integer(labels.get("block_size"))
    if blocks is None or size is None:
        return None
    return blocks * size, FROM_BLOCKS


def _integer(text: str | None) -> int | None:
    """``text`` as a whole number, None when it is absent or not one (``None``, ``1.5``)."""
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None
