#include "core/planner/CpuConvScratch.h"
#include "core/planner/Calibration.h"

#include <algorithm>
#include <optional>

// Each kernel family's model was traced on single layers (CpuMemoryCounter, the allocation hook);
// the rows, hosts and the model's history are in docs/calibration.md ("CPU convolutions").
namespace splitseg::planner::detail {

namespace {

namespace cal = calibration;

std::int64_t voxels(const std::array<std::int64_t, 3>& d) { return d[0] * d[1] * d[2]; }
// Channels padded up to oneDNN's block.
std::int64_t padTo(std::int64_t channels, std::int64_t block) { return (channels + block - 1) / block * block; }
// A layer's fp32 weights with both channel counts padded to `block` (1: as they are).
std::int64_t weightBytes(const LayerSpec& l, std::int64_t block) {
  return padTo(l.inChannels, block) * padTo(l.outChannels, block) * std::int64_t{l.kernel} * l.kernel * l.kernel * 4;
}
std::int64_t tensorBytes(const ConvTensor& t, std::int64_t batch) { return batch * t.channels * voxels(t.dims) * t.dtype; }

// bf16 oneDNN convolutions: buffers follow the channel counts padded to 16 (ci, co), not the
// tensors, and several are per thread and one sample in size (T/b below). Per voxel of the batch:
//  - 3x3x3 from 16 input channels: forward max(2ci, 2co) and a weight copy; backward
//    2(ci+co)(1 + T/b) and ~3 weight copies per thread.
//  - 3x3x3 from fewer (a plain input): forward 2co; backward 2(ci+co) with the input gradient
//    (2co without one), and from 16 output channels max(2co + that gradient + 2 max(16T, co)/b,
//    the former).
//  - 1x1x1 (the head): forward 2(ci+co) + 4co T/b (fp32 accumulators), backward 2(ci+co) +
//    max(4ci T/b, the input gradient).
//  - 2x2x2 stride-2 transposed: the batch-1 model (forward twice the output, backward one, three
//    or ~10.5 padded inputs as the input and output channels reach a block).
// Not fitted to AMX kernels (CPUs with amx_bf16), which hold larger buffers.
std::pair<std::int64_t, std::int64_t> bf16OneDnnScratch(const LayerSpec& l, const ConvTensor& in,
                                                        const ConvTensor& out, int batch, const PlannerOptions& o) {
  const auto bytesOf = [batch](const ConvTensor& t) { return batch * t.channels * voxels(t.dims) * t.dtype; };
  const std::int64_t block = std::max(1, o.cpuBf16ChannelBlock);
  const std::int64_t vin = batch * voxels(in.dims), vout = batch * voxels(out.dims);
  const std::int64_t ci = padTo(l.inChannels, block), co = padTo(l.outChannels, block);
  const bool fewIn = l.inChannels < block, fewOut = l.outChannels < block;
  const auto bytes = [](double b) { return static_cast<std::int64_t>(b); };
  if (l.kind == LayerKind::ConvTranspose)
    return {2 * bytesOf(out), bytes((fewIn    ? cal::kBf16TransposedBackwardFewIn
                                     : fewOut ? cal::kBf16TransposedBackwardFewOut
                                              : cal::kBf16TransposedBackwardBlocked) *
                                    2.0 * ci * vin)};
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
                                       2.0 * perSample *
                                           std::max<std::int64_t>(
                                               cal::kBf16OutputGradientChannelsPerThread * std::max(1, o.cpuThreads), co),
                                   grad ? 2.0 * (ci + co) * vin : 0.0);
    return {2 * co * vout, bytes(raw) - (grad ? bytesOf(in) : 0)};
  }
  // From 16 input channels: forward holds the blocked input, then the blocked output, and a
  // copy of the weights; backward the blocked input, output gradient and input gradient, and
  // the same again per thread for one sample, plus ~3 weight copies per thread.
  const double threads = std::max(1, o.cpuThreads);
  return {std::max(2 * ci * vin, 2 * co * vout) + weights,
          bytes(2.0 * (ci + co) * vin * (1.0 + threads / batch) +
                cal::kBf16BackwardWeightCopiesPerThread * threads * weights)};
}

// fp32 oneDNN convolutions on AVX2 (no AVX-512) block channels by 8 (nCdhw8c) and hold buffers
// of their own (ib, ob = input and output with padded channels):
//  - 3x3x3, stride 1: forward peaks at ib + ob with the output, backward at ib + max(input, ob)
//    with the input gradient, or at the weight gradient's gemm scratch where that is larger; the
//    first layer (no input gradient) holds nothing in backward;
//  - 1x1x1 (the head): forward ib + ob with the output, backward ib + ob + the input gradient;
//  - 2x2x2 stride-2 transposed: forward three outputs with its own, backward as on AVX-512 (two
//    outputs for fewer than 8 or not a multiple of 8 output channels).
std::int64_t transposedBackward(const LayerSpec& l, std::int64_t in, std::int64_t out) {
  return in + (l.outChannels % 8 ? 2 : 1) * out;
}

// oneDNN's gemm kernel for the weight gradient (src/cpu/gemm_convolution_utils.cpp, bwd_w): per
// thread one depth slice's im2col (ic x k^3 x H x W) and weight-gradient partials (four weight
// sizes); on all threads when batch > 1 and H x W / threads < 256, else on one. NDHWC adds a
// transposed input copy (channelsLastGemmScratch).
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
    return {std::max(inBlocked + outBlocked - out, outBlocked) +
                (l.inChannels >= 64 ? weightBytes(l, cal::kOneDnnAvx2Block) : 0),
            inputGrad ? std::max({inBlocked, inBlocked + outBlocked - in, plainGemmScratch(l, inShape, batch, threads)})
                      : 0};
  if (l.kernel == 1) return {inBlocked + outBlocked - out, inBlocked + outBlocked};
  return {in + out, in + out};  // not traced on AVX2 (the U-Nets have none): the AVX-512 model
}

// fp32 convolutions with channels-last weights: oneDNN works on NDHWC tensors without reordering.
//  - 3x3x3, stride 1: forward holds nothing beyond the output; backward the weight gradient's
//    gemm scratch for NDHWC (src/cpu/gemm_convolution_utils.cpp, nspc bwd_w): plainGemmScratch
//    plus a transposed copy of one sample's input (ic x D x H x W) per thread it runs on;
//  - 1x1x1: nothing beyond output and input gradient;
//  - 2x2x2 stride-2 transposed: forward one input-sized buffer, backward nothing more.
// A plain (NCDHW) input is reordered to channels-last first: one input-sized copy in forward and
// again in backward. The native kernels (small single-sample layers) give a plain output and copy
// a channels-last input to plain first, in forward and in backward (1x1x1: forward only).
std::int64_t channelsLastGemmScratch(const LayerSpec& l, const ConvTensor& in, int batch, int threads) {
  return plainGemmScratch(l, in, batch, threads) +
         4 * gemmThreads(in, batch, threads) * l.inChannels * voxels(in.dims);
}

// Which kernel LibTorch runs the layer with, and in which layout.
struct KernelChoice {
  bool channelsLast = false;  // oneDNN's NDHWC kernels (with channels-last weights)
  bool onednn = false;        // oneDNN rather than ATen's native kernels
};

// Mirrors ATen's ConvParams::use_mkldnn (aten/src/ATen/native/Convolution.cpp) for CPU
// tensors: small single-sample inputs go to the native kernels, the rest to oneDNN.
KernelChoice chooseKernel(const LayerSpec& l, const ConvTensor& in, std::int64_t n, const PlannerOptions& o,
                          std::int64_t wholeFactor, bool channelsLastWeights, bool inference) {
  // A 1x1x1 convolution follows its input's layout, not its weights': with a plain input (the
  // head after instance norm's plain output) it runs the plain kernels and gives a plain output.
  const bool plainPointwise = l.kind == LayerKind::Conv && l.kernel == 1 && !in.channelsLast && in.channels > 1;
  // Inference in fp32 at batch 1 on AVX-512 with channels-last weights: a first layer to fewer
  // than 8 channels and a 1x1x1 layer from fewer than 8 run oneDNN's blocked kernels with a plain
  // output, as with plain weights.
  const bool blockedInstead = inference && o.cpuAvx512 && in.dtype == 4 && n == 1 && l.kind == LayerKind::Conv &&
                              ((in.channels == 1 && l.outChannels < 8) || (l.kernel == 1 && l.inChannels < 8));
  KernelChoice k;
  // bf16 with channels-last weights only in inference (the Inferer converts every CPU stage).
  k.channelsLast = channelsLastWeights && (in.dtype == 4 || inference) && !plainPointwise && !blockedInstead;
  if (in.dtype == 2) {
    k.onednn = o.cpuAvx512;  // bf16 convolutions run in oneDNN only there
  } else {
    const bool a = l.stride > 1 || n >= 16 || l.kernel != 1 || o.cpuThreads > 1;
    // A HaloConv3d slab or micro-batch runs the kernel of its whole (shard::callsOneDnn), unless
    // its weights are channels-last with gradients recorded (LibTorch's own choice then).
    const std::int64_t whole = l.followsWhole && (!k.channelsLast || inference) ? wholeFactor : 1;
    const bool b = l.kernel > 3 || n > 1 || n * in.channels * in.dims[0] * in.dims[1] * whole > 20480;
    k.onednn = a && b;
  }
  return k;
}

// Inference with channels-last weights where the output comes back plain: a one-channel input
// (the network's first layer) and, on AVX2, a 1x1x1 layer on an NDHWC input at batch 1.
std::optional<ConvScratch> plainOutputInference(const LayerSpec& l, const ConvTensor& in, const ConvTensor& out,
                                                std::int64_t n, const PlannerOptions& o) {
  const auto bytesOf = [n](const ConvTensor& t) { return tensorBytes(t, n); };
  // A first layer LibTorch dispatches itself (batch > 1, or bf16; shard::callsOneDnn takes fp32
  // at batch 1) holds two outputs' worth beside its output. On AVX2 (fp32) oneDNN holds one
  // output blocked by 8 instead, also at batch 1 through shard::callsOneDnn; LibTorch's own
  // batch-1 call runs vol2col.
  const bool avx2Fp32 = !o.cpuAvx512 && in.dtype == 4;
  if (in.channels == 1 && l.kind == LayerKind::Conv && avx2Fp32 && (n > 1 || l.followsWhole))
    return ConvScratch{n * padTo(l.outChannels, cal::kOneDnnAvx2Block) * voxels(out.dims) * out.dtype, 0, false};
  if (in.channels == 1 && l.kind == LayerKind::Conv && !avx2Fp32 && !(in.dtype == 4 && n == 1 && l.followsWhole))
    return ConvScratch{2 * bytesOf(out), 0, false};
  // A 1x1x1 layer on an NDHWC input at batch 1 through shard::callsOneDnn copies the input
  // plain, then runs the blocked kernel (blocked input and output), plain output.
  if (avx2Fp32 && n == 1 && l.followsWhole && l.kind == LayerKind::Conv && l.kernel == 1 && in.channelsLast &&
      in.channels > 1) {
    const auto padded8 = [&](const ConvTensor& t) {
      return padTo(t.channels, cal::kOneDnnAvx2Block) * voxels(t.dims) * t.dtype;
    };
    return ConvScratch{bytesOf(in) + padded8(in) + padded8(out) - bytesOf(out), 0, false};
  }
  return std::nullopt;
}

// oneDNN's NDHWC kernels (channels-last weights): 3x3x3 stride 1, 1x1x1 and transposed layers.
// `inCopy`: the input's copy into the kernel's layout (0 when it has it already).
ConvScratch channelsLastOneDnn(const LayerSpec& l, const ConvTensor& in, const ConvTensor& out, int batch,
                               const PlannerOptions& o, bool inference, std::int64_t inCopy) {
  const std::int64_t n = batch;
  if (l.kernel == 1 && l.kind != LayerKind::ConvTranspose) return {inCopy, inCopy, true};
  // AVX-512: NDHWC in backward too (no gemm scratch), with copies of the weights in 16-channel
  // blocks: one in forward (a transposed convolution also an input-sized buffer), two in
  // backward beyond the input and weight gradients.
  if (o.cpuAvx512) {
    const std::int64_t w = weightBytes(l, cal::kOneDnnAvx512Block);
    std::int64_t forward = l.kind == LayerKind::ConvTranspose ? tensorBytes(in, n) + w : w;
    // A one-channel input (the first layer) in inference at batch 1: oneDNN computes the output
    // in 16-channel blocks and reorders it to NDHWC, the blocked copy beside it.
    if (inference && in.channels == 1 && n == 1 && in.dtype == 4 && l.kind == LayerKind::Conv)
      forward += n * padTo(l.outChannels, cal::kOneDnnAvx512Block) * voxels(out.dims) * out.dtype;
    return {forward + inCopy, 2 * w + inCopy, true};
  }
  if (l.kind == LayerKind::ConvTranspose) return {tensorBytes(in, n) + inCopy, inCopy, true};
  // Forward holds a reordered copy of the weights.
  return {weightBytes(l, 1) + inCopy, channelsLastGemmScratch(l, in, batch, o.cpuThreads) + inCopy, true};
}

// fp32 oneDNN kernels on plain (NCDHW) tensors: 3x3x3 layers reorder into layouts blocked by 16
// channels on AVX-512 (by 8 on AVX2, avx2OneDnnScratch), so their transients follow the padded
// channel counts. A strided convolution with channels-last weights (not traced; the U-Nets have
// none) is planned so too.
ConvScratch fp32OneDnn(const LayerSpec& l, const ConvTensor& in, const ConvTensor& out, int batch,
                       const PlannerOptions& o, std::int64_t inCopy) {
  const std::int64_t n = batch;
  const auto bytesOf = [n](const ConvTensor& t) { return tensorBytes(t, n); };
  const std::int64_t block = o.cpuAvx512 ? cal::kOneDnnAvx512Block : cal::kOneDnnAvx2Block;
  const auto padded = [&](const ConvTensor& t) { return n * padTo(t.channels, block) * voxels(t.dims) * t.dtype; };
  if (!o.cpuAvx512) {
    const auto [f, b] = avx2OneDnnScratch(l, in, batch, o.cpuThreads, bytesOf(in), bytesOf(out), padded(in),
                                          padded(out), in.requiresGrad);
    return {f, b, false};
  }
  if (l.kernel == 3 && l.stride == 1 && in.channels < block) {
    // Fewer than 16 input channels: oneDNN convolves the plain input and only the output is
    // blocked. Forward holds the blocked output, backward blocked output and input gradients,
    // the plain input gradient in place of the blocked one's share; without an input gradient
    // only the blocked output gradient.
    const std::int64_t pout = padded(out);
    return {pout, in.requiresGrad ? padded(in) + pout - bytesOf(in) : pout, false};
  }
  if (l.kind == LayerKind::ConvTranspose || (l.kernel == 1 && l.stride == 1)) {
    // The 1x1x1 head as on AVX2 with 16-channel blocks (forward blocked input and output in place
    // of the output, backward both beyond the input gradient). The transposed convolution holds
    // two outputs in forward and input + output in backward, two outputs when they have fewer
    // than 8 channels or not a multiple of 8.
    if (l.kind == LayerKind::ConvTranspose)
      return {2 * bytesOf(out), transposedBackward(l, bytesOf(in), bytesOf(out)), false};
    return {padded(in) + padded(out) - bytesOf(out) + inCopy, padded(in) + padded(out), false};
  }
  const std::int64_t io = bytesOf(in) + bytesOf(out);
  const std::int64_t blocked = l.kernel == 3 ? padded(in) + padded(out) : io;
  // From 16 input channels the forward frees the blocked input before the output's reorder back
  // to plain: the max of the two pairs.
  const std::int64_t forward = l.kernel == 3 ? std::max(blocked - bytesOf(out), padded(out)) : blocked;
  return {static_cast<std::int64_t>(o.cpuOneDnnForwardScratch * forward),
          static_cast<std::int64_t>(o.cpuOneDnnBackwardScratch * blocked), false};
}

// ATen's native kernels (slow_conv3d, slow_conv_transpose3d): column buffers.
ConvScratch nativeScratch(const LayerSpec& l, const ConvTensor& in, const ConvTensor& out, std::int64_t n,
                          std::int64_t inCopy) {
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

} // namespace

ConvScratch cpuConvScratch(const LayerSpec& l, const ConvTensor& in, const ConvTensor& out, int batch,
                           const PlannerOptions& o, std::int64_t wholeFactor, bool channelsLastWeights, bool inference) {
  const std::int64_t n = batch;
  const KernelChoice k = chooseKernel(l, in, n, o, wholeFactor, channelsLastWeights, inference);
  if (inference && k.channelsLast)
    if (const auto special = plainOutputInference(l, in, out, n, o)) return *special;
  // A channels-last input (more than one channel) the kernel must copy to plain, or a plain one
  // it must copy to channels-last.
  const std::int64_t inCopy =
      in.channels > 1 && in.channelsLast != (k.channelsLast && k.onednn) ? tensorBytes(in, n) : 0;
  if (k.channelsLast && k.onednn &&
      (l.kind == LayerKind::ConvTranspose || (l.stride == 1 && (l.kernel == 1 || l.kernel == 3))))
    return channelsLastOneDnn(l, in, out, batch, o, inference, inCopy);
  if (k.onednn && in.dtype == 2) {
    const auto [f, b] = bf16OneDnnScratch(l, in, out, batch, o);
    return {f, b, false};
  }
  if (k.onednn) return fp32OneDnn(l, in, out, batch, o, inCopy);
  return nativeScratch(l, in, out, n, inCopy);
}

} // namespace splitseg::planner::detail
