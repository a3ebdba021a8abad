"""ALiBi's head slopes as the references need them (test_single_decode.py's
float64 reference, test_peer_agreement.py's lse offset against FlashInfer):
the paper's, which attnjit (kernels/pos_encoding.cuh) and FlashInfer compute
the same way. Imported only after those modules have skipped without torch.
"""

import math

import torch


def alibi_slopes(num_heads, device="cuda"):
    """[num_heads] float64: 2^(-8(h+1)/n) for the n = 2^floor(log2 heads) first heads, then the
    odd steps of the next power of two's series for the rest."""
    n = 2 ** math.floor(math.log2(num_heads))
    slopes = [2.0 ** (-8.0 / n * (i + 1)) for i in range(n)]
    slopes += [2.0 ** (-4.0 / n * (2 * i + 1)) for i in range(num_heads - n)]
    return torch.tensor(slopes, dtype=torch.float64, device=device)
