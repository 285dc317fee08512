"""Paddle 1.5's public names (``paddle/fluid/API.spec`` of the 1.5 line: fluid.layers,
fluid.optimizer, fluid.io, fluid.nets and the fluid top level) and, for each one
fluid-hw does not provide, why.  ``docs/fluid_compat.md`` is generated from this module:

    .venv/bin/python -m tests.compat.paddle15_api > docs/fluid_compat.md

and tests/compat/test_fluid_compat_table.py checks the two agree with the code.
"""

from __future__ import annotations

import sys
from typing import Any


def _names(text: str) -> list[str]:
    return text.split()


LAYERS = _names("""
fc embedding dynamic_lstm dynamic_lstmp dynamic_gru gru_unit linear_chain_crf crf_decoding cos_sim
cross_entropy bpr_loss square_error_cost chunk_eval sequence_conv conv2d conv3d sequence_pool
sequence_softmax softmax pool2d pool3d adaptive_pool2d adaptive_pool3d batch_norm data_norm
beam_search_decode conv2d_transpose conv3d_transpose sequence_expand sequence_expand_as
sequence_pad sequence_unpad lstm_unit reduce_sum reduce_mean reduce_max reduce_min reduce_prod
reduce_all reduce_any sequence_first_step sequence_last_step sequence_slice dropout split
ctc_greedy_decoder edit_distance l2_normalize matmul topk warpctc sequence_reshape transpose
im2sequence nce sampled_softmax_with_cross_entropy hsigmoid beam_search row_conv multiplex
layer_norm group_norm spectral_norm softmax_with_cross_entropy smooth_l1 one_hot
autoincreased_step_counter reshape squeeze unsqueeze lod_reset lrn pad pad_constant_like
label_smooth roi_pool roi_align dice_loss image_resize image_resize_short resize_bilinear
resize_nearest gather scatter sequence_scatter random_crop mean_iou relu selu log crop rank_loss
margin_rank_loss elu relu6 pow stanh hard_sigmoid swish prelu brelu leaky_relu soft_relu flatten
sequence_mask stack pad2d unstack sequence_enumerate expand sequence_concat scale elementwise_add
elementwise_div elementwise_sub elementwise_mul elementwise_max elementwise_min elementwise_pow
elementwise_mod elementwise_floordiv uniform_random_batch_size_like gaussian_random sampling_id
gaussian_random_batch_size_like sum slice shape rank logical_and logical_or logical_xor
logical_not clip clip_by_norm mean mul sigmoid_cross_entropy_with_logits maxout space_to_depth
affine_grid sequence_reverse affine_channel similarity_focus hash grid_sampler log_loss
add_position_encoding bilinear_tensor_product merge_selected_rows get_tensor_from_selected_rows
lstm shuffle_channel temporal_shift py_func psroi_pool teacher_student_sigmoid_loss huber_loss
kldiv_loss tree_conv npair_loss pixel_shuffle fsp_matrix continuous_value_model where sign
data open_files read_file shuffle batch double_buffer random_data_generator py_reader
create_py_reader_by_data Preprocessor load
create_tensor create_parameter create_global_var cast tensor_array_to_tensor concat sums assign
fill_constant_batch_size_like fill_constant argmin argmax argsort ones zeros reverse has_inf
has_nan isfinite range linspace zeros_like diag
While Switch increment array_write create_array less_than less_equal greater_than greater_equal
equal not_equal array_read array_length IfElse DynamicRNN StaticRNN reorder_lod_tensor_by_rank
Print is_empty
sigmoid logsigmoid exp tanh atan tanh_shrink softshrink sqrt rsqrt abs ceil floor cos acos asin
sin round reciprocal square softplus softsign uniform_random hard_shrink cumsum thresholded_relu
prior_box density_prior_box multi_box_head bipartite_match target_assign detection_output
ssd_loss detection_map rpn_target_assign anchor_generator roi_perspective_transform
generate_proposal_labels generate_proposals generate_mask_labels iou_similarity box_coder
polygon_box_transform yolov3_loss yolo_box box_clip multiclass_nms distribute_fpn_proposals
box_decoder_and_assign collect_fpn_proposals
accuracy auc
exponential_decay natural_exp_decay inverse_time_decay polynomial_decay piecewise_decay
noam_decay cosine_decay linear_lr_warmup
""")

OPTIMIZER = _names("""
SGD Momentum Adagrad Adam Adamax DecayedAdagrad Ftrl SGDOptimizer MomentumOptimizer
AdagradOptimizer AdamOptimizer AdamaxOptimizer DecayedAdagradOptimizer RMSPropOptimizer
FtrlOptimizer Adadelta AdadeltaOptimizer ModelAverage LarsMomentum LarsMomentumOptimizer
DGCMomentumOptimizer ExponentialMovingAverage
""")

IO = _names("""
save_vars save_params save_persistables load_vars load_params load_persistables
save_inference_model load_inference_model PyReader
""")

NETS = _names("simple_img_conv_pool sequence_conv_pool glu scaled_dot_product_attention "
               "img_conv_group")

TOP = _names("""
Program default_startup_program default_main_program program_guard name_scope cuda_places
cpu_places cuda_pinned_places in_dygraph_mode Executor global_scope scope_guard
DistributeTranspiler memory_optimize release_memory DistributeTranspilerConfig
ParallelExecutor create_lod_tensor create_random_int_lodtensor DataFeedDesc CompiledProgram
ExecutionStrategy BuildStrategy LoDTensor LoDTensorArray CPUPlace CUDAPlace CUDAPinnedPlace
ParamAttr WeightNormParamAttr DataFeeder Scope
io layers nets optimizer initializer backward regularizer clip profiler unique_name transpiler
contrib dygraph
""")

_DETECTION = ("detection-specific op (SSD / YOLO / Faster R-CNN box, anchor and proposal "
              "handling); out of fluid-hw's scope, as issue 20 allows")
_READER = ("file / preprocessing reader op: fluid-hw reads through fluid.layers.py_reader, "
           "fluid.io.PyReader, Executor.run(feed=...) and fluid.DataFeeder")

#: why each Paddle 1.5 name fluid-hw does not provide is missing
REASONS: dict[str, str] = {
    **{n: _DETECTION for n in _names("""prior_box density_prior_box multi_box_head bipartite_match
       target_assign detection_output ssd_loss detection_map rpn_target_assign anchor_generator
       roi_perspective_transform generate_proposal_labels generate_proposals
       generate_mask_labels iou_similarity box_coder polygon_box_transform yolov3_loss yolo_box
       box_clip multiclass_nms distribute_fpn_proposals box_decoder_and_assign
       collect_fpn_proposals roi_pool roi_align psroi_pool""")},
    **{n: _READER for n in _names("""open_files shuffle batch random_data_generator
       Preprocessor""")},
    "dynamic_lstmp": "LSTM with a projection layer: not implemented (dynamic_lstm, lstm_unit "
                     "and dynamic_gru are)",
    "lstm": "the cuDNN LSTM layer: not implemented (dynamic_lstm and lstm_unit are)",
    "data_norm": "CTR-specific normalisation whose statistics are updated in the backward "
                 "pass: not implemented",
    "warpctc": "CTC loss: not implemented (ctc_greedy_decoder and edit_distance are)",
    "im2sequence": "image patches as a sequence: not implemented",
    "nce": "noise-contrastive estimation (sampled loss): not implemented",
    "sampled_softmax_with_cross_entropy": "sampled softmax loss: not implemented",
    "hsigmoid": "hierarchical sigmoid loss: not implemented",
    "grid_sampler": "spatial-transformer sampling: not implemented (affine_grid is)",
    "similarity_focus": "specialised attention mask op: not implemented",
    "hash": "xxHash-based feature hashing (values depend on Paddle's hash): not implemented",
    "tree_conv": "tree-based convolution: not implemented",
    "continuous_value_model": "CTR show/click op with a non-gradient backward: not "
                              "implemented",
    "ModelAverage": "parameter averaging with apply/restore: not implemented",
    "DGCMomentumOptimizer": "deep gradient compression for multi-GPU training: not "
                            "implemented",
    "ExponentialMovingAverage": "shadow-parameter averaging: not implemented",
    "name_scope": "not provided yet (issue 20's core part)",
    "in_dygraph_mode": "not provided yet (issue 20's core part)",
    "cuda_places": "device lists for multi-device runs: not provided (one place per executor)",
    "cpu_places": "device lists for multi-device runs: not provided (one place per executor)",
    "cuda_pinned_places": "pinned host memory: not provided",
    "CUDAPinnedPlace": "pinned host memory: not provided",
    "DistributeTranspiler": "provided as fluid.transpiler.DistributeTranspiler only",
    "DistributeTranspilerConfig": "provided as fluid.transpiler.DistributeTranspilerConfig "
                                  "only",
    "ParallelExecutor": "multi-device executor: not provided (CompiledProgram is)",
    "DataFeedDesc": "the Dataset / DataFeed pipeline (train_from_dataset): not provided",
    "LoDTensorArray": "tensor arrays are Python lists in fluid-hw's scopes: no class",
    "WeightNormParamAttr": "weight-normalisation reparametrisation: not provided",
    "profiler": "fluid.profiler: not provided (fluid_hw.bench measures throughput)",
    "contrib": "fluid.contrib: not provided under that name (quantisation: fluid_hw.passes)",
    "dygraph": "imperative (dygraph) mode: not provided",
}


def module_of(section: str) -> Any:
    import fluid_hw as fluid

    return {"fluid.layers": fluid.layers, "fluid.optimizer": fluid.optimizer,
            "fluid.io": fluid.io, "fluid.nets": getattr(fluid, "nets", None),
            "fluid": fluid}[section]


SECTIONS: dict[str, list[str]] = {"fluid.layers": LAYERS, "fluid.optimizer": OPTIMIZER,
                                  "fluid.io": IO, "fluid.nets": NETS, "fluid": TOP}


def provided(section: str, name: str) -> bool:
    mod = module_of(section)
    return mod is not None and hasattr(mod, name)


def share(section: str) -> tuple[int, int]:
    names = SECTIONS[section]
    return sum(provided(section, n) for n in names), len(names)


def render() -> str:
    out = ["# Fluid 1.5 compatibility: which of Paddle 1.5's names fluid-hw provides", "",
           "Generated by `python -m tests.compat.paddle15_api` from the names of Paddle 1.5's",
           "public API (`paddle/fluid/API.spec`): `import fluid_hw as fluid` gives each name",
           "marked *yes* with Paddle 1.5's signature and defaults; tests/compat/",
           "test_fluid_compat_table.py checks this table against the code.", ""]
    for section, names in SECTIONS.items():
        have, total = share(section)
        out += [f"## {section}: {have} of {total} ({100 * have / total:.1f} %)", "",
                "| name | provided | why not |", "|---|---|---|"]
        for n in names:
            ok = provided(section, n)
            why = "" if ok else REASONS.get(n, "not provided yet")
            out.append(f"| `{n}` | {'yes' if ok else 'no'} | {why} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(render())
