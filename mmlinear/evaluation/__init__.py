"""How good a model's outputs are, beyond the metrics of the OpenMMLab evaluators: the
attention-quality metrics of a classifier's saliency maps (MoRF / LeRF perturbation curves,
box ROC-AUC and average precision).

This layer sits beside :mod:`mmlinear.apis` and :mod:`mmlinear.visualization`, whose image
loading and saliency maps it scores; nothing below it imports it.
"""
from .attention_quality import (ORDERS, SALIENCY_SOURCES, area_over_curve, average_precision,
                                box_mask, check_saliency_source, evaluate_attention_quality,
                                load_boxes, perturbation_curve, plot_perturbation_curves, roc_auc)

__all__ = [
    'ORDERS', 'SALIENCY_SOURCES', 'area_over_curve', 'average_precision', 'box_mask',
    'check_saliency_source', 'evaluate_attention_quality', 'load_boxes', 'perturbation_curve',
    'plot_perturbation_curves', 'roc_auc'
]
