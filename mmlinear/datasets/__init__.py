"""Datasets that the toolboxes do not ship, registered under the ``mmlinear`` scope."""
from .imagenet_v2 import ImageNetV2

__all__ = ['ImageNetV2']
