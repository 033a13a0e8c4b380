// ImageTool.cpp - the runner's image code, driven from tests/integration/test_images.py, which
// compares each answer with torchvision and PIL.
//
//   hgp_image_tool box W H SCALE_LO SCALE_HI RATIO_LO RATIO_HI U...   RandomResizedCrop's box
//       from the given uniform draws: prints "i j h w"
//   hgp_image_tool decode FILE C OUT.raw [DENOM]                      decoded HWC bytes
//   hgp_image_tool crop FILE C X0 Y0 X1 Y1 W H OUT.raw [DENOM]         crop, then resize to W x H
//   hgp_image_tool center FILE C RESIZE W H OUT.raw                    Resize + CenterCrop
//   hgp_image_tool pad FILE C W H PADDING U1 U2 OUT.raw                RandomCrop with padding
//   hgp_image_tool list DIR                                            ImageFolder: "label path"
//   hgp_image_tool shards PATTERN RANK RANKS [BUFFER]                  rank RANK's tar shard
//       samples, in one epoch's streamed order with shuffling (seed 1) through a shuffle
//       buffer of BUFFER samples (default 1000): "label shard:member"
// Prints "W H" of the written image. Exit code 5 for a bad image, with the message.
#include "runtime/runner/ImageDataset.h"
#include "runtime/runner/ImageTransform.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

using namespace hgp;

namespace {

std::vector<uint8_t> readFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

int fail(const Status& st) {
  std::fprintf(stderr, "error: %s\n", st.toString().c_str());
  return exitCodeFor(st.code());
}

int write(const Image& img, const char* path) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(img.pixels.data()), std::streamsize(img.pixels.size()));
  std::printf("%d %d\n", img.width, img.height);
  return out ? 0 : 4;
}

Uniform replay(char** first, char** last) {
  auto values = std::make_shared<std::vector<double>>();
  for (char** p = first; p < last; ++p) values->push_back(std::atof(*p));
  auto next = std::make_shared<size_t>(0);
  return [values, next] { return *next < values->size() ? (*values)[(*next)++] : 0.5; };
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 3) return std::fprintf(stderr, "usage: see ImageTool.cpp\n"), 2;
  std::string cmd = argv[1];
  if (cmd == "box" && argc >= 8) {
    Box b = randomResizedCropBox(std::atoi(argv[2]), std::atoi(argv[3]), std::atof(argv[4]),
                                 std::atof(argv[5]), std::atof(argv[6]), std::atof(argv[7]),
                                 replay(argv + 8, argv + argc));
    std::printf("%d %d %d %d\n", int(b.y0), int(b.x0), int(b.height()), int(b.width()));
    return 0;
  }
  if (cmd == "list") {
    auto src = openImageFolder(argv[2], {}, /*skipBad=*/true);
    if (!src) return fail(src.status());
    for (int64_t i = 0; i < (*src)->size(); ++i)
      std::printf("%lld %s\n", (long long)(*src)->label(i), (*src)->name(i).c_str());
    return 0;
  }
  if (cmd == "shards" && (argc == 5 || argc == 6)) {
    auto src = openTarShards(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), {},
                             argc == 6 ? std::atoll(argv[5]) : 1000);
    if (!src) return fail(src.status());
    std::vector<std::string> names;
    std::vector<int64_t> labels;
    for (int64_t i = 0; i < (*src)->size(); ++i) names.push_back((*src)->name(i)), labels.push_back((*src)->label(i));
    ImageDatasetOptions o;
    o.sampleShape = {1, 28, 28};
    auto data = makeImageDataset(std::move(*src), o);
    for (int64_t i : data->order(/*shuffle=*/true, /*seed=*/1, /*epoch=*/0))
      std::printf("%lld %s\n", (long long)labels[size_t(i)], names[size_t(i)].c_str());
    return 0;
  }
  if (argc < 5) return 2;
  std::vector<uint8_t> bytes = readFile(argv[2]);
  int channels = std::atoi(argv[3]);
  Image img, out;
  auto decode = [&](int denom) { return decodeImage(bytes.data(), bytes.size(), channels, denom, img); };
  if (cmd == "decode") {
    if (Status st = decode(argc > 5 ? std::atoi(argv[5]) : 1); !st) return fail(st);
    return write(img, argv[4]);
  }
  if (cmd == "crop" && argc >= 11) {
    int denom = argc > 11 ? std::atoi(argv[11]) : 1;
    if (Status st = decode(denom); !st) return fail(st);
    auto info = probeImage(bytes.data(), bytes.size());
    if (!info) return fail(info.status());
    double fx = double(img.width) / info->width, fy = double(img.height) / info->height;
    Box b{std::atof(argv[4]) * fx, std::atof(argv[5]) * fy, std::atof(argv[6]) * fx, std::atof(argv[7]) * fy};
    std::array<int, 4> clip{int(b.x0), int(b.y0), std::min(img.width, int(std::ceil(b.x1))),
                            std::min(img.height, int(std::ceil(b.y1)))};
    resample(img, clip, b, std::atoi(argv[8]), std::atoi(argv[9]), out);
    return write(out, argv[10]);
  }
  if (cmd == "center" && argc >= 8) {
    if (Status st = decode(1); !st) return fail(st);
    int w = std::atoi(argv[5]), h = std::atoi(argv[6]);
    Box b = resizeCenterCropBox(img.width, img.height, std::atoi(argv[4]), w, h);
    resample(img, {0, 0, img.width, img.height}, b, w, h, out);
    return write(out, argv[7]);
  }
  if (cmd == "pad" && argc >= 10) {
    if (Status st = decode(1); !st) return fail(st);
    randomCropPadded(img, std::atoi(argv[4]), std::atoi(argv[5]), std::atoi(argv[6]),
                     replay(argv + 7, argv + 9), out);
    return write(out, argv[9]);
  }
  std::fprintf(stderr, "usage: see ImageTool.cpp\n");
  return 2;
}
