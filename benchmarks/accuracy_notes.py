"""Text and published figures of docs/ACCURACY.md (benchmarks/accuracy_table.py): what each fixture
is and what was read off it, the Jetson TX1 audit and the published AlexNet throughputs it compares
with. The findings from the per-kernel rows ("What limits accuracy") are in accuracy_limits.py."""

# fixture -> (description by provenance, what of the model was read off this file)
FIXTURE_NOTES = {
    "a100_train_shapes.json.gz": ("HTA trace_diff control, A100, training with Input Dims",
                                  "the dgx-a100 3.0-us kernel floor (median of its 1,170 one-block kernels)"),
    "a100_80gb_train_prewindow.json.gz": ("HTA, A100-SXM4-80GB, training, 5 steps, shapes",
                                          "nothing"),
    "h100_timesformer_inference.json.gz": ("TraceLens, H100, TimeSformer inference, shapes",
                                           "nothing"),
    "mi300x_normalization_bench.json.gz": ("TraceLens, MI300X, normalization microbenchmark",
                                           "nothing"),
    "mi300x_sd35_inference.json.gz": ("TraceLens, MI300X, Stable Diffusion 3.5 inference",
                                      "the mi300x 2.0-us kernel floor (median of its 317 one-block kernels)"),
    "mi250_mlp_train.json.gz": ("HTA, MI250 GCD, tiny MLP training", "nothing"),
    "v100_resnet50_train_2021.json.gz": ("Kineto tb_plugin sample, V100-DGXS, ResNet-50 training",
                                         "nothing"),
    "nodevice_sampled_train.json.gz": ("HTA, no deviceProperties (sm_80 from kernel names)",
                                       "nothing"),
    "v100_cnn_ddp_train.json.gz": ("HTA, V100-SXM2, CNN DDP training, no shapes",
                                   "the dgx1-v100 1.25-us kernel floor"),
    "a100_alexnet_forward.json.gz": ("HTA, A100, AlexNet forward, no shapes",
                                     "the pageable staging rate (4.3 GB/s) and first chunk (1 MiB)"),
    "a100_event_sync_multistream.json.gz": ("HTA, A100, 3-stream GEMMs, no shapes", "nothing"),
    "rtx2080ti_mlp_train.json.gz": ("param, RTX 2080 Ti, MLP training, no shapes",
                                    "the rtx2080ti 2-us kernel floor"),
    "gp100_user_annotation.json.gz": ("HTA, Quadro GP100 (no preset), small training step",
                                      "nothing"),
    "mi210_gpu_only.json.gz": ("TraceLens, MI210, GPU-only trace",
                               "the CDNA2 3.7-us kernel floor (median of its 83 one-block kernels)"),
}  # fmt: skip
REFUSED = {
    "a100_cupti_range_no_kernels.json.gz": "CUPTI range-profiler mode: no kernel events to compare",
    "mtia_inference.json.gz": "Meta MTIA: no CUDA/ROCm kernels",
}
# Model-only (shapes-only) and V100-calibrated total errors of this page before issue 12 (model at
# peak, efficiency 1; commit 367c405's docs/ACCURACY.md).
BEFORE = {
    "v100_cnn_ddp_train.json.gz": ("+15.6%", "+0.0% (in sample)"),
    "a100_alexnet_forward.json.gz": ("-7.7%", "-9.1% (kernels only -52.8%)"),
    "a100_event_sync_multistream.json.gz": ("+125.9%", "-19.0%"),
    "rtx2080ti_mlp_train.json.gz": ("-26.0%", "-56.5%"),
}


# Findings from the per-kernel rows below (python benchmarks/accuracy_table.py; the per-kernel
# breakdown by kernel name was read with pandas over the same frames).

# NVIDIA, "GPU-Based Deep Learning Inference: A Performance and Power Analysis" (whitepaper, Nov 2015),
# Table 3: AlexNet with Caffe + cuDNN 4 on Jetson TX1 (GPU at 998 MHz): FP32 47 images/s at batch 1
# and 155 at batch 128; FP16 67 at batch 1 and 258 at batch 128.
PUBLISHED = {
    ("jetson-tx1", "alexnet-b1-fp32", 1): 47.0,
    ("jetson-tx1", "alexnet-b32-fp32", 128): 155.0,
    ("jetson-tx1", "alexnet-b32-fp16", 128): 258.0,
    ("jetson-tx1", "alexnet-b32-fp16", 1): 67.0,
}


def tx1_audit(rates: dict) -> list[str]:
    """The Jetson TX1 audit, with the predicted/published ratios of this run (``rates``: predicted
    images/s per (preset, trace, batch), from accuracy_alexnet.alexnet_rows)."""

    def ratio(trace: str, batch: int) -> str:
        key = ("jetson-tx1", trace, batch)
        return f"{rates[key] / PUBLISHED[key]:.2f}" if key in rates else "n/a"

    fp16_gain = "n/a"
    if ("jetson-tx1", "alexnet-b32-fp16", 128) in rates:
        gain = rates[("jetson-tx1", "alexnet-b32-fp16", 128)]
        fp16_gain = f"{gain / rates[('jetson-tx1', 'alexnet-b32-fp32', 128)]:.2f}"
    return [
        "**Jetson TX1 (Maxwell GM20B) audit.** The `jetson-tx1` preset's figures are the data sheet's",
        "(2 SMs, 998 MHz, 25.6 GB/s LPDDR4 shared with the CPU, 256 KB L2, no tensor cores). What the",
        "model does with them: GM20B's 2x FP16 rate needs packed half2 math, and PyTorch never asks",
        "for it: fp16 GEMMs run cublasGemmEx with FP32 compute (aten/src/ATen/cuda/CUDABlas.cpp), fp16",
        "convolutions set cuDNN's math type to FLOAT (aten/src/ATen/cudnn/Descriptors.h), element-wise",
        "and reduction loops compute in float. So every op of a PyTorch capture runs its math at the",
        "FP32 rate and gains from FP16 only through halved bytes; only kernels a GPU trace names as",
        "native-FP16 cuBLAS/cuDNN kernels (`maxwell_hgemm_*`, `*_hcudnn_*`) get the 2x",
        "(`archsim.perf.math_units.HALF2_KERNEL_PATTERN`). DRAM is priced at 0.70 of 25.6 GB/s (the P100",
        "stream fraction: no GM20B measurement was found), with no contention from the CPU, which",
        "shares the memory. Its DRAM latency (317 ns, the V100's measured pointer chase), L2 bandwidth",
        "and kernel floor are assumptions carried from the V100.",
        "",
        f"Against the whitepaper's FP32 rows the model is {ratio('alexnet-b1-fp32', 1)}x (batch 1) and",
        f"{ratio('alexnet-b32-fp32', 128)}x (batch 128) too fast. The last column shows why: Caffe with",
        "cuDNN 4 reached 0.43 of the FP32 peak at batch 128 (0.13 at batch 1, where AlexNet's fully",
        "connected layers are matrix-vector products bound by LPDDR4), while the model assumes the",
        "Volta-era cuBLAS fraction (0.85) for GEMM and convolution engines on Maxwell. The",
        "whitepaper's 0.43 was not fitted into the model (it would make this comparison in sample).",
        "Independent Maxwell measurements were sought to replace the 0.85; they disagree with one",
        "another by more than the gap, so it was kept. (1) soumith/convnet-benchmarks",
        "(torch7/imagenet_winners/output.log: GeForce GTX Titan X, GM200, Torch with cuDNN R4 and",
        "its autotuner on, FP32) ran the same AlexNet layers as torchvision's forward at batch 128",
        "in 27.65 ms: 182.8 GFLOP of direct convolution and FC work at 6.61 TFLOP/s, 1.00 of the",
        "6.61 TFLOP/s boost-clock peak (3,072 lanes x 2 x 1,075 MHz); VGG-A (batch 64, 162.74 ms)",
        "0.91, OverFeat-fast (batch 128, 94.28 ms) 1.15. Fractions at or above 1 mean FFT",
        "convolutions (cuDNN R4 has them, and the autotuner picks the fastest) or clocks above the",
        "rated boost, so these bound what Maxwell's libraries deliver; they are not a GEMM fraction.",
        "(2) maxDNN (Lavin 2015, arXiv:1501.06633, which compares cuDNN v2 RC1; eBay/maxDNN README):",
        "on a GTX 980 (GM204) the state of the art's forward convolutions ran at 30-75% of peak",
        "(nvprof flop_sp_efficiency), maxDNN's at ~95%. (3) On a GM20B itself only a forum post (NVIDIA",
        'developer forums, "How to test the fp16 benchmark performance on tx1?"): a half2 matrix',
        "multiply at 0.86 TFLOP/s of the 1.02 TFLOP/s FP16 peak at 998 MHz (0.84), its code and",
        "library not shown. (4) DeepBench (baidu-research/DeepBench) holds cuBLAS/cuDNN results for",
        "the Titan X (Maxwell), M40 and Jetson TX1 only as .xlsx workbooks, not read for this page.",
        "Large Maxwell convolutions thus reached 0.3-1.0 of peak by library release and algorithm:",
        "no figure to set the row from, and none that puts Maxwell's libraries near the whitepaper's",
        "0.43, whose causes on the TX1 its figures do not separate.",
        "",
        "The FP16 rows compare different software: the whitepaper ran NVIDIA's Caffe FP16 path,",
        "native half2 math (155 -> 258 images/s, 1.66x, at batch 128), while the captured PyTorch",
        f"AlexNet computes in FP32 on this GPU, so the model gives it {fp16_gain}x from halved bytes",
        "alone (the GM200 Titan X above, which has no half2 rate, ran the same AlexNet 1.11x faster",
        "with cuDNN R4's FP16 storage: 27.65 -> 24.87 ms, output_cudnn_fp16.log). Its FP16 ratios",
        f"({ratio('alexnet-b32-fp16', 1)}x at batch 1, {ratio('alexnet-b32-fp16', 128)}x at batch 128)",
        "are two errors of opposite sign (the FP32 rows' excess and Caffe's half2 gain, absent from",
        "PyTorch), not agreement. No published AlexNet throughput was found for the other presets'",
        "GPUs with the same software, so their rows are predictions only.",
    ]
