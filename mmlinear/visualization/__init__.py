"""What the analysis tools draw and score: saliency maps read from a backbone's attention, the
isotropy of VECA's cores and the size of the regions they attend to, the cosine between a
global token and the patches, dense features as colours (by PCA and by UMAP), how
Linear-InfSA's key weights align with the InfSA operator's Perron vector, and effective
receptive fields.

This layer sits above :mod:`mmlinear.models` (it inspects the backbones' layers), so nothing
in :mod:`mmlinear.models`, :mod:`mmlinear.ops` or :mod:`mmlinear.utils` may import it.
"""
from .attention_saliency import QUERY_MODES, attention_saliency, minmax, upsample_saliency
from .core_isotropy import core_isotropy
from .core_regions import core_partition, half_mass_area
from .effective_receptive_field import (DEFAULT_THRESHOLDS, area_ratios, build_featmap_backbone,
                                        effective_receptive_field)
from .feature_colours import pca_rgb, umap_rgb
from .global_similarity import foreground_background_cosine, global_patch_cosine, map_correlation
from .spectral_alignment import (ALIGNED_ATTN_TYPES, left_perron_vector, perron_alignment, spearman,
                                 spectral_alignment)

__all__ = [
    'ALIGNED_ATTN_TYPES', 'DEFAULT_THRESHOLDS', 'QUERY_MODES', 'area_ratios', 'attention_saliency',
    'build_featmap_backbone', 'core_isotropy', 'core_partition', 'effective_receptive_field',
    'foreground_background_cosine', 'global_patch_cosine', 'half_mass_area', 'left_perron_vector',
    'map_correlation', 'minmax', 'pca_rgb', 'perron_alignment', 'spearman', 'spectral_alignment',
    'umap_rgb', 'upsample_saliency'
]
