"""mmseg's decode heads run over bands of rows (whole-image inference); mmseg's own modules
are imported from ``mmlinear.models.decode_heads.uper_head_bands`` where it is installed."""
