#include "core/placement/CpuConvScratch.h"

#include <algorithm>

namespace splitseg::placement::detail {

namespace {

std::int64_t voxels(const std::array<std::int64_t, 3>& d) { return d[0] * d[1] * d[2]; }
// Channels padded up to oneDNN's block.
std::int64_t padTo(std::int64_t channels, std::int64_t block) { return (channels + block - 1) / block * block; }
// A layer's fp32 weights with both channel counts padded to `block` (1: as they are).
std::int64_t weightBytes(const LayerSpec& l, std::int64_t block) {
  return padTo(l.inChannels, block) * padTo(l.outChannels, block) * std::int64_t{l.kernel} * l.kernel * l.kernel * 4;
}

// bf16 oneDNN convolutions on CPU, per kernel family, from CpuMemoryCounter traces of single
// layers (forward: transient above the output; backward: above the input gradient). oneDNN
// reorders plain tensors into layouts blocked by 16 channels, so the buffers follow the padded
// channel counts ci, co, not the tensors: a 4-channel layer costs as much as a 16-channel one.
// Several buffers are per thread and one sample in size, so they grow with threads / batch
// (T/b below; the model used to be fitted at batch 1 on two threads, and batch 2-4 steps were
// planned 15-59% high: PlannerMeasuredTest's batch rows, RankMemoryTest's bf16 micro-batches).
// Single layers on an AVX-512 AMD EPYC (AVX512_CORE_BF16 kernels, torch 2.11, 2026-12-05;
// 16^3-32^3, batch 1-4, T 1-2), per voxel of the batch:
//  - 3x3x3 from 16 input channels: forward max(2ci, 2co) and a weight copy; backward
//    2(ci+co)(1 + T/b) and ~3 weight copies per thread (within ~2% at 32^3; more at 16^3).
//  - 3x3x3 from fewer (a plain input): forward 2co; backward 2(ci+co) with the input gradient
//    (2co without one), and from 16 output channels max(2co + that gradient + 2 max(16T, co)/b,
//    the former) - exact to 1 byte per voxel in every row traced.
//  - 1x1x1 (the head): forward 2(ci+co) + 4co T/b (fp32 accumulators), backward 2(ci+co) +
//    max(4ci T/b, the input gradient) - exact to 0.4 bytes per voxel in every row traced.
//  - 2x2x2 stride-2 transposed convolution: still the batch-1 model (forward twice the output,
//    backward one, three or ~10.5 padded inputs as the input and output channels reach a block).
//    Single layers at batch 1 hold more than it says for fewer than 32 input channels (8->4: 112
//    against 32 bytes per input voxel) and less at batch 2-4 (32->16: 447-498 against 672); the
//    steps traced do not peak there, and the fit is left for when one does.
// Not fitted to AMX kernels (CPUs with amx_bf16), which hold larger buffers: whole steps
// measured 4-15% above the batch-1 model there (PlannerMeasuredTest).
std::pair<std::int64_t, std::int64_t> bf16OneDnnScratch(const LayerSpec& l, const ConvTensor& in,
                                                        const ConvTensor& out, int batch, const PlannerOptions& o) {
  const auto bytesOf = [batch](const ConvTensor& t) { return batch * t.channels * voxels(t.dims) * t.dtype; };
  const std::int64_t block = std::max(1, o.cpuBf16ChannelBlock);
  const std::int64_t vin = batch * voxels(in.dims), vout = batch * voxels(out.dims);
  const std::int64_t ci = padTo(l.inChannels, block), co = padTo(l.outChannels, block);
  const bool fewIn = l.inChannels < block, fewOut = l.outChannels < block;
  const auto bytes = [](double b) { return static_cast<std::int64_t>(b); };
  if (l.kind == LayerKind::ConvTranspose)
    return {2 * bytesOf(out), bytes((fewIn ? 1.0 : fewOut ? 3.0 : 10.5) * 2.0 * ci * vin)};
  if (l.kernel == 1) {
    // One fp32 accumulator per thread the size of one sample's blocked output (forward) or input
    // gradient (backward): with more threads than samples each thread still holds a whole one.
    const double perThread = static_cast<double>(std::max(1, o.cpuThreads)) / batch;
    const double acc = 4.0 * perThread * static_cast<double>(vin);
    return {bytes(2.0 * (ci + co) * vin + acc * co) - bytesOf(out),
            bytes(2.0 * (ci + co) * vin + std::max(acc * ci, static_cast<double>(bytesOf(in)))) - bytesOf(in)};
  }
  const double perSample = static_cast<double>(vin) / batch;
  const std::int64_t weights = weightBytes(l, block);
  if (fewIn) {
    // Plain input: forward holds the blocked output. Backward holds blocked output and input
    // gradients; from 16 output channels also one sample's blocked output gradient per thread
    // (at least all the output's blocks), beside the input gradient.
    const bool grad = in.requiresGrad;
    double raw = fewOut ? (grad ? 2.0 * (ci + co) : 2.0 * co) * vin
                        : std::max((2.0 * co + (grad ? 2.0 * l.inChannels : 0.0)) * vin +
                                       2.0 * perSample * std::max<std::int64_t>(16 * std::max(1, o.cpuThreads), co),
                                   grad ? 2.0 * (ci + co) * vin : 0.0);
    return {2 * co * vout, bytes(raw) - (grad ? bytesOf(in) : 0)};
  }
  // From 16 input channels: forward holds the blocked input, then the blocked output, and a
  // copy of the weights; backward the blocked input, output gradient and input gradient, and
  // the same again per thread for one sample, plus ~3 weight copies per thread.
  const double threads = std::max(1, o.cpuThreads);
  return {std::max(2 * ci * vin, 2 * co * vout) + weights,
          bytes(2.0 * (ci + co) * vin * (1.0 + threads / batch) + 3.0 * threads * weights)};
}

// fp32 oneDNN convolutions on AVX2 (no AVX-512): channels blocked by 8 (nCdhw8c), and the
// buffers differ from the AVX-512 kernels'. Per layer, from single-layer traces on an AMD EPYC
// (2 threads, torch 2.11, 2026-12-04; ib, ob = input and output with padded channels, exact in
// every oneDNN row traced, 32^3-64^3, batch 1-4, 8-40 channels):
//  - 3x3x3, stride 1: forward peaks at ib + ob with the output, backward at ib + max(input, ob)
//    with the input gradient (backward weights run oneDNN's plain-layout gemm kernel);
//  - 1x1x1 (the head): forward ib + ob with the output, backward ib + ob + the input gradient;
//  - 2x2x2 stride-2 transposed: forward three outputs with its own, backward as on AVX-512.
// With the AVX-512 model instead, whole steps whose peak is a full-resolution decoder's backward
// were 7-10% over (PlannerMeasuredTest's batch rows; tests/bench 64^3-112^3 at base 16).
// Single layers with oneDNN capped to AVX2 on an AVX-512 AMD EPYC (CpuConvScratchTest, 2026-12-04)
// added: the first layer (no input gradient) holds nothing in backward (the model had 3.75 MiB at
// 1->8, batch 2, 32^3); a transposed convolution to fewer than 8 or not a multiple of 8 channels
// holds two outputs in backward, as on AVX-512. The weight gradient's gemm scratch
// (plainGemmScratch) makes the 3x3x3 backward's peak where it is larger: the small deep layers
// with a batch (1.5 MiB more than the rest at 32->32, 16^3, batch 2).
std::int64_t transposedBackward(const LayerSpec& l, std::int64_t in, std::int64_t out) {
  return in + (l.outChannels % 8 ? 2 : 1) * out;
}

// oneDNN's gemm kernel for the weight gradient (src/cpu/gemm_convolution_utils.cpp, bwd_w): per
// thread one depth slice's im2col (ic x k^3 x H x W) and weight-gradient partials (four weight
// sizes); on all threads when batch > 1 and H x W / threads < 256, else on one. On AVX2 with
// plain (NCDHW) tensors, 3x3x3 layers 8-64 channels, 8^3-32^3, batch 2-4 (CpuConvScratchTest,
// AMD EPYC, 2 threads, torch 2.11; docs/planner-gaps.md): the backward peak is the larger of this and the
// blocked buffers, exact to 1 KiB in every row below 24^3; NDHWC adds a transposed input copy.
std::int64_t gemmThreads(const ConvTensor& in, int batch, int threads) {
  const std::int64_t hw = in.dims[1] * in.dims[2];
  return batch > 1 && hw / std::max(1, threads) < 256 ? std::max(1, threads) : 1;
}

std::int64_t plainGemmScratch(const LayerSpec& l, const ConvTensor& in, int batch, int threads) {
  const std::int64_t ks = std::int64_t{l.kernel} * l.kernel * l.kernel;
  const std::int64_t hw = in.dims[1] * in.dims[2];
  return 4 * gemmThreads(in, batch, threads) * (l.inChannels * hw * ks + 4 * ks * l.inChannels * l.outChannels);
}

std::pair<std::int64_t, std::int64_t> avx2OneDnnScratch(const LayerSpec& l, const ConvTensor& inShape, int batch,
                                                        int threads, std::int64_t in, std::int64_t out,
                                                        std::int64_t inBlocked, std::int64_t outBlocked,
                                                        bool inputGrad) {
  if (l.kind == LayerKind::ConvTranspose) return {2 * out, transposedBackward(l, in, out)};
  // Forward: a layer that widens holds its blocked output beside the output; from 64 input
  // channels also a reordered copy of the weights (none at 8-32; the rows of plainGemmScratch).
  if (l.kernel == 3 && l.stride == 1)
    return {std::max(inBlocked + outBlocked - out, outBlocked) + (l.inChannels >= 64 ? weightBytes(l, 8) : 0),
            inputGrad ? std::max({inBlocked, inBlocked + outBlocked - in, plainGemmScratch(l, inShape, batch, threads)})
                      : 0};
  if (l.kernel == 1) return {inBlocked + outBlocked - out, inBlocked + outBlocked};
  return {in + out, in + out};  // not traced on AVX2 (the U-Nets have none): the AVX-512 model
}

// fp32 convolutions with channels-last weights (2 threads, torch 2.11, AMD EPYC with AVX2,
// 2026-12-04; single layers traced with the torch profiler's memory events, 16^3-64^3, batch 1-4,
// 4-64 channels). oneDNN then works on NDHWC tensors without reordering them:
//  - 3x3x3, stride 1: forward holds nothing beyond the output. Backward computes the weight
//    gradient with oneDNN's gemm kernel for NDHWC (src/cpu/gemm_convolution_utils.cpp, nspc
//    bwd_w), whose scratchpad per thread is one depth slice's im2col (ic x 27 x H x W), a
//    transposed copy of one sample's input (ic x D x H x W) and weight-gradient partials (four
//    weight sizes here); it runs on all threads only when batch > 1 and H x W / threads < 256,
//    else on one. Exact (to 384 bytes) in every row traced;
//  - 1x1x1: nothing beyond output and input gradient;
//  - 2x2x2 stride-2 transposed: forward one input-sized buffer, backward nothing more.
// A plain (NCDHW) input is reordered to channels-last first: one input-sized copy in forward and
// again in backward. The native kernels (small single-sample layers) give a plain output and copy
// a channels-last input to plain first, in forward and in backward (1x1x1: forward only).
std::int64_t channelsLastGemmScratch(const LayerSpec& l, const ConvTensor& in, int batch, int threads) {
  return plainGemmScratch(l, in, batch, threads) +
         4 * gemmThreads(in, batch, threads) * l.inChannels * voxels(in.dims);
}

} // namespace

// Mirrors ATen's ConvParams::use_mkldnn (aten/src/ATen/native/Convolution.cpp) for CPU
// tensors: small single-sample inputs go to the native kernels, the rest to oneDNN.
ConvScratch cpuConvScratch(const LayerSpec& l, const ConvTensor& in, const ConvTensor& out, int batch,
                           const PlannerOptions& o, std::int64_t wholeFactor, bool channelsLastWeights, bool inference) {
  const std::int64_t n = batch;
  const auto bytesOf = [n](const ConvTensor& t) { return n * t.channels * voxels(t.dims) * t.dtype; };
  // A 1x1x1 convolution follows its input's layout, not its weights': with a plain input (the
  // head after instance norm's plain output) it runs the plain kernels and gives a plain output
  // (single layers, AVX2 and AVX-512, 2026-12-04; forward and backward as without channels-last).
  const bool plainPointwise = l.kind == LayerKind::Conv && l.kernel == 1 && !in.channelsLast && in.channels > 1;
  // Inference in fp32 at batch 1 on AVX-512 with channels-last weights: a first layer to fewer
  // than 8 channels and a 1x1x1 layer from fewer than 8 run oneDNN's blocked kernels with a plain
  // output, as with plain weights (single layers in InferenceMode, 2026-12-05: 1->4 and 4->1 at
  // 32^3 exact with that model; 1->8, 4->4, 4->8, 8->4 and 8->1 keep the channels-last one; at
  // batch 2 base 4's whole pass is exact without this, InferencePlanTest).
  const bool blockedInstead = inference && o.cpuAvx512 && in.dtype == 4 && n == 1 && l.kind == LayerKind::Conv &&
                              ((in.channels == 1 && l.outChannels < 8) || (l.kernel == 1 && l.inChannels < 8));
  // bf16 with channels-last weights only in inference (the Inferer converts every CPU stage).
  const bool cl = channelsLastWeights && (in.dtype == 4 || inference) && !plainPointwise && !blockedInstead;
  bool onednn;
  if (in.dtype == 2) {
    onednn = o.cpuAvx512;  // bf16 convolutions run in oneDNN only there
  } else {
    const bool a = l.stride > 1 || n >= 16 || l.kernel != 1 || o.cpuThreads > 1;
    // A HaloConv3d slab or micro-batch runs the kernel of its whole (shard::callsOneDnn), unless
    // its weights are channels-last with gradients recorded (LibTorch's own choice then).
    const std::int64_t whole = l.followsWhole && (!cl || inference) ? wholeFactor : 1;
    const bool b = l.kernel > 3 || n > 1 || n * in.channels * in.dims[0] * in.dims[1] * whole > 20480;
    onednn = a && b;
  }
  const std::int64_t io = bytesOf(in) + bytesOf(out);
  // Inference, channels-last weights, a one-channel input (the network's first layer) that LibTorch
  // dispatches itself (batch > 1, or bf16; shard::callsOneDnn takes fp32 at batch 1): the output
  // comes back plain, with two outputs' worth beside it (single layers in InferenceMode, AVX-512
  // AMD EPYC, 2 threads, torch 2.11, 2026-12-05: 1->8 at 32^3, fp32 batch 2 and bf16 batch 1).
  // On AVX2 (fp32; CpuConvScratchTest's inference rows, AMD EPYC, 2 threads, torch 2.11,
  // docs/planner-gaps.md) oneDNN holds one output blocked by 8 instead, also at batch 1 through
  // shard::callsOneDnn, and the output is plain; LibTorch's own batch-1 call runs vol2col.
  const bool avx2Fp32 = !o.cpuAvx512 && in.dtype == 4;
  if (inference && cl && in.channels == 1 && l.kind == LayerKind::Conv && avx2Fp32 && (n > 1 || l.followsWhole))
    return {n * padTo(l.outChannels, 8) * voxels(out.dims) * out.dtype, 0, false};
  if (inference && cl && in.channels == 1 && l.kind == LayerKind::Conv && !avx2Fp32 &&
      !(in.dtype == 4 && n == 1 && l.followsWhole))
    return {2 * bytesOf(out), 0, false};
  // The same rows: a 1x1x1 layer on an NDHWC input at batch 1 through shard::callsOneDnn copies
  // the input plain, then runs the blocked kernel (blocked input and output), plain output.
  if (inference && cl && avx2Fp32 && n == 1 && l.followsWhole && l.kind == LayerKind::Conv && l.kernel == 1 &&
      in.channelsLast && in.channels > 1) {
    const auto padded8 = [&](const ConvTensor& t) { return padTo(t.channels, 8) * voxels(t.dims) * t.dtype; };
    return {bytesOf(in) + padded8(in) + padded8(out) - bytesOf(out), 0, false};
  }
  // A channels-last input (more than one channel) the kernel must copy to plain, or a plain one
  // it must copy to channels-last.
  const std::int64_t inCopy = in.channels > 1 && in.channelsLast != (cl && onednn) ? bytesOf(in) : 0;
  if (cl && onednn && (l.kind == LayerKind::ConvTranspose || (l.stride == 1 && (l.kernel == 1 || l.kernel == 3)))) {
    if (l.kernel == 1 && l.kind != LayerKind::ConvTranspose) return {inCopy, inCopy, true};
    // Channels-last on AVX-512 (2 threads, torch 2.11, AMD EPYC with AVX-512, 2026-12-04;
    // single layers with CpuMemoryCounter, 4^3-48^3, batch 2-4, 2-128 channels, NDHWC input):
    // oneDNN's AVX-512 kernels take NDHWC directly in backward too (no gemm scratch: the AVX2
    // model was 1.8 MiB over a batch-2 decoder at 32^3). They hold copies of the weights in
    // 16-channel blocks: one in forward (a transposed convolution also an input-sized buffer),
    // two in backward beyond the input and weight gradients. Within ~50 KiB of every traced
    // 3x3x3 and transposed layer; 1x1x1 as on AVX2.
    if (o.cpuAvx512) {
      const std::int64_t w = weightBytes(l, 16);
      std::int64_t forward = l.kind == LayerKind::ConvTranspose ? bytesOf(in) + w : w;
      // A one-channel input (the first layer) in inference at batch 1: oneDNN computes the output
      // in 16-channel blocks and reorders it to NDHWC, the blocked copy beside it (traced through
      // the allocation hook, 1->8 at 32^3 in InferenceMode: 2 MiB then the 1 MiB output, AMD EPYC
      // AVX-512, torch 2.11, 2026-12-05; hidden in one process, where later stages peak higher,
      // and found as rank 0's peak over ranks).
      if (inference && in.channels == 1 && n == 1 && in.dtype == 4 && l.kind == LayerKind::Conv)
        forward += n * padTo(l.outChannels, 16) * voxels(out.dims) * out.dtype;
      return {forward + inCopy, 2 * w + inCopy, true};
    }
    if (l.kind == LayerKind::ConvTranspose) return {bytesOf(in) + inCopy, inCopy, true};
    // Forward holds a reordered copy of the weights (single layers capped to AVX2, 2026-12-04:
    // 0.49 MiB at 64->64, where the weights are 0.42 MiB).
    return {weightBytes(l, 1) + inCopy, channelsLastGemmScratch(l, in, batch, o.cpuThreads) + inCopy, true};
  }
  if (onednn && in.dtype == 2) {
    const auto [f, b] = bf16OneDnnScratch(l, in, out, batch, o);
    return {f, b, false};
  }
  if (onednn) {
    // fp32 oneDNN 3x3x3 convolutions reorder into layouts blocked by 16 channels too: their
    // transients follow the padded channel counts (bases 12 and 20 at 64^3 measured 7% above the
    // unpadded figure with the allocation hook; padded, they and base 24 at 48^3 are exact, bases
    // 4, 8 and 16 unchanged; 2026-12-02). On AVX2 (no AVX-512) oneDNN blocks by 8 (with 16 the
    // batch-2 rows of PlannerMeasuredTest were +15.8% on an AVX2-only AMD EPYC, with 8 +7.4%,
    // 2026-12-03) and keeps other buffers (avx2OneDnnScratch: those rows exact). A strided
    // convolution with channels-last weights (not traced; the U-Nets have none) is planned so.
    const std::int64_t block = o.cpuAvx512 ? 16 : 8;
    const auto padded = [&](const ConvTensor& t) {
      return n * padTo(t.channels, block) * voxels(t.dims) * t.dtype;
    };
    if (!o.cpuAvx512) {
      const auto [f, b] = avx2OneDnnScratch(l, in, batch, o.cpuThreads, bytesOf(in), bytesOf(out), padded(in),
                                            padded(out), in.requiresGrad);
      return {f, b, false};
    }
    if (l.kernel == 3 && l.stride == 1 && in.channels < block) {
      // Fewer than 16 input channels: oneDNN convolves the plain input and only the output is
      // blocked. Forward holds the blocked output, backward blocked output and input gradients,
      // the plain input gradient in place of the blocked one's share; without an input gradient
      // only the blocked output gradient. Single layers on an AVX-512 AMD EPYC (2 threads, torch
      // 2.11, 2026-12-04; 16^3-32^3, batch 2-4, 1-12 -> 8-32 channels): exact to 0.07 MiB. The
      // model below had these layers 4 MiB over in RankMemoryTest's base-8 enc0 (+10%).
      const std::int64_t pout = padded(out);
      return {pout, in.requiresGrad ? padded(in) + pout - bytesOf(in) : pout, false};
    }
    if (l.kind == LayerKind::ConvTranspose || (l.kernel == 1 && l.stride == 1)) {
      // Single layers on the same AVX-512 AMD EPYC (16^3-48^3, batch 2-4, 2-32 channels): the
      // 1x1x1 head as on AVX2 with 16-channel blocks (forward blocked input and output in place of
      // the output, backward both beyond the input gradient; exact). The transposed convolution
      // holds two outputs in forward and input + output in backward, two outputs when they have
      // fewer than 8 channels or not a multiple of 8 (exact at 4, 8 and 16 output channels; over
      // by 0.6-1.2 outputs at 2, 6 and 12). The model below had the head 5.8 MiB under at base 8, batch 2, 32^3
      // (PlannerMeasuredTest's batch 2 instance row, -6%: its peak is the head's backward).
      if (l.kind == LayerKind::ConvTranspose)
        return {2 * bytesOf(out), transposedBackward(l, bytesOf(in), bytesOf(out)), false};
      return {padded(in) + padded(out) - bytesOf(out) + inCopy, padded(in) + padded(out), false};
    }
    const std::int64_t blocked = l.kernel == 3 ? padded(in) + padded(out) : io;
    // From 16 input channels the measured forward freed the blocked input before the output's
    // reorder back to plain (the same run: max of the two pairs, exact to 0.11 MiB).
    const std::int64_t forward = l.kernel == 3 ? std::max(blocked - bytesOf(out), padded(out)) : blocked;
    return {static_cast<std::int64_t>(o.cpuOneDnnForwardScratch * forward),
            static_cast<std::int64_t>(o.cpuOneDnnBackwardScratch * blocked), false};
  }
  const std::int64_t k3 = std::int64_t{l.kernel} * l.kernel * l.kernel;
  if (l.kind == LayerKind::ConvTranspose) {
    // slow_conv_transpose3d: columns of (out channels x k^3) x input voxels, one sample at a
    // time, in forward and again in backward (input and weight gradients in turn).
    const std::int64_t cols = l.outChannels * k3 * voxels(in.dims) * in.dtype;
    return {cols + inCopy, cols + inCopy, false};
  }
  if (l.kernel == 1 && l.stride == 1 && l.padding == 0) return {inCopy, 0, false};  // columns are the input
  // slow_conv3d: columns of (in channels x k^3) x output voxels for the whole batch; backward
  // needs one such buffer at a time (input gradient, then the rebuilt columns for the weight's).
  const std::int64_t cols = n * l.inChannels * k3 * voxels(out.dims) * in.dtype;
  return {cols + inCopy, cols + inCopy, false};
}

} // namespace splitseg::placement::detail
