// Images for TensorBoard as torch's SummaryWriter.add_images / add_image make them (what Accelerate's
// TensorBoardTracker.log_images calls): the tensor laid out by `dataformats` (a batch as a grid of up
// to 8 columns, gray as RGB), scaled to 0..255 unless it is uint8, clipped, truncated to bytes, PNG.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace at {
class Tensor;
}

namespace acc::tracking {

struct EncodedImage {
  int64_t height = 0;
  int64_t width = 0;
  int colorspace = 0;  // channels: 3 (RGB) or 4 (RGBA)
  std::string png;
};

// The layout torch's convert_to_HWC takes: "NCHW" (the default) or another order of those letters for
// a batch (1 or 3 channels), an order of "CHW" for one image (1, 3 or 4 channels), "HW" for one gray
// image; case is ignored. Refuses (InvalidArgument, naming `name`) a layout the tensor does not have,
// an empty image, a complex dtype. Cheap: every process checks what the main one writes.
void check_image(const at::Tensor& image, const std::string& dataformats, const std::string& name);
EncodedImage encode_image(const at::Tensor& image, const std::string& dataformats, const std::string& name);
// The images of `image` one by one: each image of a batch (an order of NCHW) on its own, as wandb
// takes a list of images; a single image as encode_image makes it.
std::vector<EncodedImage> encode_images_apart(const at::Tensor& image, const std::string& dataformats,
                                              const std::string& name);

}  // namespace acc::tracking
