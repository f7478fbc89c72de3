from .simple_feature_pyramid import SimpleFeaturePyramid

__all__ = ['SimpleFeaturePyramid']
