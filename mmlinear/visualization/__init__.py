"""What the analysis tools draw and score: saliency maps read from a backbone's attention.

This layer sits above :mod:`mmlinear.models` (it inspects the backbones' layers), so nothing
in :mod:`mmlinear.models`, :mod:`mmlinear.ops` or :mod:`mmlinear.utils` may import it.
"""
from .attention_saliency import QUERY_MODES, attention_saliency, patch_grid, upsample_saliency

__all__ = ['QUERY_MODES', 'attention_saliency', 'patch_grid', 'upsample_saliency']
