"""What the analysis tools draw and score: saliency maps read from a backbone's attention, the
isotropy of VECA's cores, and dense features as colours.

This layer sits above :mod:`mmlinear.models` (it inspects the backbones' layers), so nothing
in :mod:`mmlinear.models`, :mod:`mmlinear.ops` or :mod:`mmlinear.utils` may import it.
"""
from .attention_saliency import QUERY_MODES, attention_saliency, upsample_saliency
from .core_isotropy import core_isotropy
from .feature_pca import pca_rgb

__all__ = ['QUERY_MODES', 'attention_saliency', 'core_isotropy', 'pca_rgb', 'upsample_saliency']
