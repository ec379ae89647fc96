#include "tracking/image_summary.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "common/error.h"
#include "common/text.h"
#include "tracking/png.h"

namespace acc::tracking {
namespace {

constexpr int64_t kGridColumns = 8;  // torch's make_grid(ncols=8)
constexpr int64_t kMaxPngSide = (int64_t{1} << 31) - 1;

// The positions of `order`'s letters in the (checked) layout.
std::vector<int64_t> axes_of(const std::string& layout, const char* order) {
  std::vector<int64_t> axes;
  for (const char* c = order; *c; ++c) axes.push_back(static_cast<int64_t>(layout.find(*c)));
  return axes;
}

struct GridShape {
  int64_t rows, columns;
};
GridShape grid_shape(int64_t images) {
  const int64_t columns = std::min(images, kGridColumns);
  return {(images + columns - 1) / columns, columns};
}

std::string checked_layout(const at::Tensor& image, const std::string& dataformats, const std::string& name) {
  const std::string layout = uppercase(dataformats);
  std::string letters = layout;
  std::sort(letters.begin(), letters.end());
  const bool known = letters == "CHNW" || letters == "CHW" || letters == "HW";
  require(known, "log_images: \"", name, "\": dataformats \"", dataformats, "\" is not an order of NCHW, CHW or HW");
  require(image.dim() == static_cast<int64_t>(layout.size()), "log_images: \"", name, "\" has ", image.dim(),
          " dimensions, but dataformats \"", dataformats, "\" names ", layout.size());
  require(!image.is_complex(), "log_images: \"", name, "\" is complex (", image.scalar_type(), ")");
  for (int64_t d = 0; d < image.dim(); ++d)
    require(image.size(d) > 0, "log_images: \"", name, "\" is empty (its ", layout[d], " is 0)");
  // The PNG's sides (a batch's grid), each at most PNG's 2^31 - 1: refused here, on every process.
  const int64_t h = image.size(static_cast<int64_t>(layout.find('H')));
  const int64_t w = image.size(static_cast<int64_t>(layout.find('W')));
  const GridShape shape =
      layout.size() == 4 ? grid_shape(image.size(static_cast<int64_t>(layout.find('N')))) : GridShape{1, 1};
  require(h <= kMaxPngSide / shape.rows && w <= kMaxPngSide / shape.columns, "log_images: \"", name, "\" makes an ",
          "image of ", h, "x", shape.rows, " by ", w, "x", shape.columns, " pixels: a PNG's sides are at most ",
          kMaxPngSide);
  const auto channels = layout.find('C');
  if (channels != std::string::npos) {
    const int64_t c = image.size(static_cast<int64_t>(channels));
    const bool batch = layout.size() == 4;
    require(c == 1 || c == 3 || (!batch && c == 4), "log_images: \"", name, "\" has ", c, " channels (",
            batch ? "a batch takes 1 or 3" : "an image takes 1, 3 or 4", ")");
  }
  return layout;
}

// A batch (N, 3, H, W) as one (3, H * rows, W * columns) canvas, row by row, the rest black.
at::Tensor grid(const at::Tensor& batch) {
  const int64_t n = batch.size(0), h = batch.size(2), w = batch.size(3);
  const GridShape shape = grid_shape(n);
  const int64_t cells = shape.rows * shape.columns;
  const at::Tensor filled = cells == n ? batch : at::cat({batch, at::zeros({cells - n, 3, h, w}, batch.options())});
  return filled.reshape({shape.rows, shape.columns, 3, h, w})
      .permute({2, 0, 3, 1, 4})
      .reshape({3, shape.rows * h, shape.columns * w});
}

// torch's convert_to_HWC: (H, W, 3 or 4).
at::Tensor to_hwc(const at::Tensor& image, const std::string& layout) {
  if (layout.size() == 4) {
    at::Tensor batch = image.permute(axes_of(layout, "NCHW"));
    if (batch.size(1) == 1) batch = batch.expand({-1, 3, -1, -1});
    return grid(batch).permute({1, 2, 0});
  }
  if (layout.size() == 3) {
    at::Tensor hwc = image.permute(axes_of(layout, "HWC"));
    return hwc.size(2) == 1 ? hwc.expand({-1, -1, 3}) : hwc;
  }
  return image.permute(axes_of(layout, "HW")).unsqueeze(2).expand({-1, -1, 3});
}

}  // namespace

void check_image(const at::Tensor& image, const std::string& dataformats, const std::string& name) {
  (void)checked_layout(image, dataformats, name);
}

EncodedImage encode_image(const at::Tensor& image, const std::string& dataformats, const std::string& name) {
  const std::string layout = checked_layout(image, dataformats, name);
  const at::Tensor hwc = to_hwc(image.detach().to(at::kCPU), layout);
  // uint8 is taken as 0..255, anything else as 0..1: times 255 in float32, clipped, truncated (NaN: 0).
  const double scale = hwc.scalar_type() == at::kByte ? 1.0 : 255.0;
  const at::Tensor pixels =
      hwc.to(at::kFloat).mul(scale).nan_to_num(0.0).clamp(0.0, 255.0).to(at::kByte).contiguous();
  EncodedImage out;
  out.height = pixels.size(0);
  out.width = pixels.size(1);
  out.colorspace = static_cast<int>(pixels.size(2));
  out.png = encode_png(pixels.data_ptr<uint8_t>(), out.height, out.width, out.colorspace);
  return out;
}

std::vector<EncodedImage> encode_images_apart(const at::Tensor& image, const std::string& dataformats,
                                              const std::string& name) {
  const std::string layout = checked_layout(image, dataformats, name);
  if (layout.size() != 4) return {encode_image(image, dataformats, name)};
  const auto batch_axis = static_cast<int64_t>(layout.find('N'));
  std::string item_layout = layout;
  item_layout.erase(static_cast<size_t>(batch_axis), 1);
  std::vector<EncodedImage> out;
  for (int64_t i = 0; i < image.size(batch_axis); ++i)
    out.push_back(encode_image(image.select(batch_axis, i), item_layout, name));
  return out;
}

}  // namespace acc::tracking
