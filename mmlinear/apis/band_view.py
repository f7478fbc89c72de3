"""Deprecated: :class:`BandView` is :class:`~mmlinear.apis.channel_view.ChannelView` (a band is
a band of image rows in mmlinear; an image's spectral bands are its channels)."""
from mmlinear.utils.deprecation import renamed_attributes
from .channel_view import ChannelView

__all__ = ['ChannelView']

__getattr__ = renamed_attributes(globals(), dict(BandView='ChannelView'))
