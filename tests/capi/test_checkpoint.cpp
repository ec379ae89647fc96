// Safetensors: round trips, the bytes on disk read by an independent reader, corrupt files,
// Hugging Face's sharded layout through acc_save_model, loading into a model.
#include <dirent.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "support.h"

using acc_test::floats;
using acc_test::read_file;
using acc_test::temp_path;
using acc_test::to_floats;

namespace {

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A safetensors file from a header and data, as a third party would write it.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out + header + data;
}

std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') names.insert(e->d_name);
    closedir(d);
  }
  return names;
}

}  // namespace

TEST(Safetensors, EveryDtypeRoundTripsAndTheBytesFollowTheFormat) {
  acc_tensor_list* list = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&list));
  const float f32[3] = {1.5f, -2.0f, 3.25f};
  const double f64[2] = {0.1, -0.2};
  const uint16_t half[2] = {0x3c00, 0xc000}, bf16[2] = {0x3f80, 0x4000};
  const int64_t i64[2] = {-5, 1LL << 40};
  const int32_t i32[1] = {7};
  const uint8_t u8[4] = {0, 1, 2, 255}, flags[2] = {1, 0};
  struct Item {
    const char* name;
    const void* data;
    size_t bytes;
    acc_dtype dtype;
    std::vector<int64_t> dims;
  } items[] = {{"w.f32", f32, sizeof f32, ACC_DTYPE_FLOAT32, {3}},  {"w.f64", f64, sizeof f64, ACC_DTYPE_FLOAT64, {2, 1}},
               {"w.f16", half, sizeof half, ACC_DTYPE_FLOAT16, {2}}, {"w.bf16", bf16, sizeof bf16, ACC_DTYPE_BFLOAT16, {2}},
               {"w.i64", i64, sizeof i64, ACC_DTYPE_INT64, {2}},    {"w.i32", i32, sizeof i32, ACC_DTYPE_INT32, {}},
               {"w.u8", u8, sizeof u8, ACC_DTYPE_UINT8, {2, 2}},    {"w.bool", flags, sizeof flags, ACC_DTYPE_BOOL, {2}}};
  for (const auto& item : items) {
    acc_tensor* t = nullptr;
    ACC_ASSERT_OK(acc_tensor_from_host(item.data, item.bytes, item.dims.data(), item.dims.size(), item.dtype, &t));
    ACC_ASSERT_OK(acc_tensor_list_append(list, item.name, t));
    acc_tensor_free(t);
  }
  const std::string path = temp_path("all.safetensors");
  ACC_ASSERT_OK(acc_tensor_list_save_safetensors(list, path.c_str()));

  // An independent reader of the format.
  const std::string bytes = read_file(path);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ((8 + header_size) % 8, 0u);  // data aligned
  auto header = nlohmann::json::parse(bytes.substr(8, header_size));
  EXPECT_EQ(header["__metadata__"]["format"], "pt");
  EXPECT_EQ(header["w.bf16"]["dtype"], "BF16");
  EXPECT_EQ(header["w.f64"]["shape"], nlohmann::json::array({2, 1}));
  const auto begin = header["w.f32"]["data_offsets"][0].get<size_t>();
  float stored[3];
  std::memcpy(stored, bytes.data() + 8 + header_size + begin, sizeof stored);
  EXPECT_EQ(stored[2], 3.25f);
  EXPECT_EQ(bytes.size(), 8 + header_size + header["w.bool"]["data_offsets"][1].get<size_t>());

  acc_tensor_list* back = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors(path.c_str(), &back));
  size_t n = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(back, &n));
  ASSERT_EQ(n, 8u);
  for (const auto& item : items) {
    acc_tensor* t = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_find(back, item.name, &t));
    std::vector<char> got(item.bytes);
    ACC_ASSERT_OK(acc_tensor_to_host(t, got.data(), got.size()));
    EXPECT_EQ(0, std::memcmp(got.data(), item.data, item.bytes)) << item.name;
    acc_dtype dtype = ACC_DTYPE_UNDEFINED;
    ACC_ASSERT_OK(acc_tensor_dtype(t, &dtype));
    EXPECT_EQ(dtype, item.dtype);
    acc_tensor_free(t);
  }
  acc_tensor_list_free(back);
  acc_tensor_list_free(list);
  std::remove(path.c_str());
}

// What acc_tensor_list_load_safetensors hands out is the caller's, as Python's load_file: a file
// rewritten in place or cut short afterwards changes nothing in it (nor kills the process).
TEST(Safetensors, LoadedTensorsAreIndependentOfTheFile) {
  const std::string path = temp_path("independent.safetensors");
  std::vector<float> ones(4096, 1.0f);  // a few pages of data
  acc_tensor* w = floats(ones, {4096});
  acc_tensor_list* list = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&list));
  ACC_ASSERT_OK(acc_tensor_list_append(list, "w", w));
  ACC_ASSERT_OK(acc_tensor_list_save_safetensors(list, path.c_str()));
  acc_tensor_list* back = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors(path.c_str(), &back));
  {  // the data rewritten in place, as dd or an in-place writer would
    std::string bytes = read_file(path);
    const float two = 2.0f;
    for (size_t at = bytes.size() - 4096 * 4; at < bytes.size(); at += 4) std::memcpy(&bytes[at], &two, 4);
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  acc_tensor* t = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_find(back, "w", &t));
  EXPECT_EQ(to_floats(t), ones);
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  EXPECT_EQ(to_floats(t), ones);
  acc_tensor_free(t);
  acc_tensor_list_free(back);
  acc_tensor_list_free(list);
  acc_tensor_free(w);
  std::remove(path.c_str());
}

TEST(Safetensors, LaidOutAsTheReferenceWriterSoEveryTensorIsAligned) {
  // Python's safetensors writes larger dtypes first, then names in order, and lists the header the
  // same way: an int64 (BatchNorm's num_batches_tracked) after an odd number of floats would start
  // at 4 mod 8 otherwise, which readers that view the mapped file in place refuse.
  acc_tensor_list* list = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&list));
  const uint8_t flags[3] = {1, 0, 1};
  const float one[1] = {1.0f}, two[2] = {2.0f, 3.0f};
  const int64_t count[1] = {5};
  const uint16_t half[1] = {0x3c00};
  struct Item {
    const char* name;
    const void* data;
    size_t bytes;
    acc_dtype dtype;
    int64_t n;
  } items[] = {{"b.bool", flags, 3, ACC_DTYPE_BOOL, 3},     {"a.f32", one, 4, ACC_DTYPE_FLOAT32, 1},
               {"n", count, 8, ACC_DTYPE_INT64, 1},         {"h", half, 2, ACC_DTYPE_FLOAT16, 1},
               {"c.f32", two, 8, ACC_DTYPE_FLOAT32, 2}};
  for (const auto& item : items) {
    acc_tensor* t = nullptr;
    ACC_ASSERT_OK(acc_tensor_from_host(item.data, item.bytes, &item.n, 1, item.dtype, &t));
    ACC_ASSERT_OK(acc_tensor_list_append(list, item.name, t));
    acc_tensor_free(t);
  }
  const std::string path = temp_path("aligned.safetensors");
  ACC_ASSERT_OK(acc_tensor_list_save_safetensors(list, path.c_str()));
  std::string header =
      R"({"__metadata__":{"format":"pt"},"n":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
      R"("a.f32":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},"c.f32":{"dtype":"F32","shape":[2],"data_offsets":[12,20]},)"
      R"("h":{"dtype":"F16","shape":[1],"data_offsets":[20,22]},"b.bool":{"dtype":"BOOL","shape":[3],"data_offsets":[22,25]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string data;
  for (const char* name : {"n", "a.f32", "c.f32", "h", "b.bool"})
    for (const auto& item : items)
      if (std::string(item.name) == name) data.append(static_cast<const char*>(item.data), item.bytes);
  EXPECT_EQ(read_file(path), safetensors_bytes(header, data));
  acc_tensor_list_free(list);
  std::remove(path.c_str());
}

TEST(Safetensors, ANullMetadataIsNone) {
  // The reference reader declares __metadata__ optional: null is no metadata (Python's safetensors reads it).
  const std::string path = temp_path("null_metadata.safetensors");
  const float values[2] = {1.5f, -2.0f};
  write_file(path, safetensors_bytes(R"({"__metadata__":null,"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                                     std::string(reinterpret_cast<const char*>(values), sizeof values)));
  acc_tensor_list* out = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors(path.c_str(), &out));
  size_t n = 0;
  ACC_ASSERT_OK(acc_tensor_list_size(out, &n));
  EXPECT_EQ(n, 1u);
  acc_tensor_list_free(out);
  std::remove(path.c_str());
}

TEST(Safetensors, CorruptFilesAreRejectedWithTheReason) {
  const std::string path = temp_path("bad.safetensors");
  acc_tensor_list* out = nullptr;
  auto expect = [&](const std::string& bytes, const char* reason) {
    write_file(path, bytes);
    ACC_EXPECT_ERROR(acc_tensor_list_load_safetensors(path.c_str(), &out), ACC_ERR_IO, reason);
    EXPECT_EQ(out, nullptr);
  };
  const std::string data(8, '\0');
  expect("abc", "too short");
  expect(std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8), "too large");
  expect(safetensors_bytes("{\"a\":{\"dtype\":\"F32\"", data), "not valid JSON");
  expect(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "") + "", "outside the data");
  expect(safetensors_bytes(R"({"a":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}})", data), "unknown dtype 'F12'");
  // The reference reader's JSON parser refuses a byte-order mark (nlohmann's lexer skipped it).
  expect(safetensors_bytes("\xEF\xBB\xBF{}", ""), "byte-order mark");
  // A dtype the format defines but libtorch 1.13 has no element type for: said so, not "unknown".
  write_file(path, safetensors_bytes(R"({"a":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})", data));
  ACC_EXPECT_ERROR(acc_tensor_list_load_safetensors(path.c_str(), &out), ACC_ERR_UNSUPPORTED,
                   "'F8_E4M3', which safetensors defines but this library cannot read");
  expect(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data), "needs 12 bytes but has 8");
  expect(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                           data),
         "overlaps");
  expect(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data), "hole");
  // Sizes whose byte count wraps around 2^64 to the bytes present (4, then 0).
  expect(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[4611686018427387905],"data_offsets":[0,4]}})", data.substr(0, 4)),
         "does not fit in 64 bits");
  expect(safetensors_bytes(R"({"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}})", ""),
         "does not fit in 64 bits");
  expect(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1]}})", data), "needs dtype, shape and data_offsets");
  // The header is read as it is parsed (no JSON tree of up to 100 MB held): each wrong piece named.
  expect(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],)"
                           R"("data_offsets":[0,8]}})",
                           data),
         "tensor 'a' is named twice");
  expect(safetensors_bytes("[1, 2]", data), "the header is not a JSON object");
  expect(safetensors_bytes("7", data), "the header is not a JSON object");
  expect(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,8]}})", data), "bad shape");
  expect(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}})", data), "data_offsets");
  expect(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,-8]}})", data), "bad data_offsets");
  expect(safetensors_bytes(R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data),
         "__metadata__['k'] is not a string");
  std::string dims = "1";
  for (int i = 0; i < 1100; ++i) dims += ",1";
  expect(
      safetensors_bytes(R"({"a":{"dtype":"F32","shape":[)" + dims + R"(],"data_offsets":[0,4]}})", data.substr(0, 4)),
      "more than 1024 dimensions");
  std::string nested = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":)" + std::string(300, '[') +
                       std::string(300, ']') + "}}";
  expect(safetensors_bytes(nested, data), "nested deeper than 256 levels");
  // What the reference reader refuses too: anything after a NUL byte (nlohmann's lexer would stop
  // there), a size written as -0, a second __metadata__, a NUL inside a name.
  expect(safetensors_bytes(std::string("{}\0{}", 5), ""), "a NUL byte at offset 2");
  expect(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[-0],"data_offsets":[0,0]}})", ""), "bad shape");
  expect(safetensors_bytes(R"({"__metadata__":{"a":"1"},"__metadata__":null})", ""), "__metadata__ appears twice");
  expect(safetensors_bytes(R"({"a\u0000x":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})", ""), "NUL character");
  // Keys the reference reader ignores are ignored, nested or not.
  write_file(path, safetensors_bytes(
                       R"({"a":{"note":{"x":[1,{"y":null}]},"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data));
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors(path.c_str(), &out));
  acc_tensor_list_free(out);
  out = nullptr;
  // Tensors come in the file's order, empty ones (no data of their own) at their offsets.
  write_file(path,
             safetensors_bytes(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[0],)"
                               R"("data_offsets":[1,1]},"a":{"dtype":"U8","shape":[0],"data_offsets":[1,1]},)"
                               R"("c":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})",
                               std::string(1, '\0')));
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors(path.c_str(), &out));
  std::vector<std::string> order;
  for (size_t i = 0; i < 4; ++i) {
    const char* name = nullptr;
    ACC_ASSERT_OK(acc_tensor_list_name(out, i, &name));
    order.push_back(name);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"c", "w", "b", "a"}));
  acc_tensor_list_free(out);
  out = nullptr;
  // Raw bytes that are not UTF-8 in the header: the message quotes them escaped, so that it stays
  // UTF-8 (bindings read messages as strings).
  write_file(path, safetensors_bytes("{\"a\xff\xfe\":1", data));
  ACC_EXPECT_ERROR(acc_tensor_list_load_safetensors(path.c_str(), &out), ACC_ERR_IO, "not valid JSON");
  EXPECT_EQ(std::string(acc_last_error_message()).find('\xff'), std::string::npos) << acc_last_error_message();
  EXPECT_NE(std::string(acc_last_error_message()).find("\\xFF"), std::string::npos) << acc_last_error_message();
  // A header length past the end of the file.
  expect(std::string("\x10\x00\x00\x00\x00\x00\x00\x00", 8) + "{}", "runs past the end");
  ACC_EXPECT_ERROR(acc_tensor_list_load_safetensors("/nonexistent.safetensors", &out), ACC_ERR_IO, "cannot open");
  std::remove(path.c_str());
}

TEST(SaveModel, ShardsAsHuggingFaceAndLoadsBack) {
  acc_accelerator* acc = nullptr;
  ACC_ASSERT_OK(acc_accelerator_create(nullptr, &acc));
  const char* spec = R"([{"type":"linear","in_features":16,"out_features":16},{"type":"relu"},
                         {"type":"linear","in_features":16,"out_features":16},{"type":"batchnorm1d","num_features":16}])";
  ACC_ASSERT_OK(acc_set_seed(1));
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(spec, &model));
  acc_model* prepared = nullptr;
  ACC_ASSERT_OK(acc_prepare_model(acc, model, ACC_PLACEMENT_DEFAULT, &prepared));
  const std::string dir = temp_path("saved_model");
  ACC_ASSERT_OK(
      acc_save_model(acc, prepared, dir.c_str(),
                     " 1200 b"));  // each linear weight is 1024 bytes (spaces and case as huggingface_hub takes them)
  auto files = files_in(dir);
  EXPECT_TRUE(files.count("model.safetensors.index.json"));
  EXPECT_TRUE(files.count("model-00001-of-00003.safetensors")) << files.size();
  auto index = nlohmann::json::parse(read_file(dir + "/model.safetensors.index.json"));
  EXPECT_EQ(index["weight_map"]["0.weight"], "model-00001-of-00003.safetensors");
  EXPECT_EQ(index["weight_map"].size(), 9u);  // 4 + 5 entries (batch norm has 3 buffers) — names as the model's
  EXPECT_EQ(index["metadata"]["total_size"], (256 + 16) * 4 * 2 + 16 * 4 * 4 + 8);

  ACC_ASSERT_OK(acc_set_seed(2));
  acc_model* fresh = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(spec, &fresh));
  ACC_ASSERT_OK(acc_model_load_safetensors(fresh, dir.c_str(), 1, nullptr, nullptr));
  acc_tensor *a = nullptr, *b = nullptr;
  ACC_ASSERT_OK(acc_model_parameter(model, "2.weight", &a));
  ACC_ASSERT_OK(acc_model_parameter(fresh, "2.weight", &b));
  EXPECT_EQ(to_floats(a), to_floats(b));
  acc_tensor_free(a);
  acc_tensor_free(b);

  // A second save in one file replaces the shards, and removes the stale ones; the user's files
  // beside them, whatever their names, stay.
  const std::set<std::string> users = {"model_best.safetensors", "model_1.safetensors", "modelzoo.safetensors",
                                       "model-final.safetensors", "model_shard_0.safetensors",
                                       "model-00001-of-0003.safetensors"};
  for (const auto& name : users) std::ofstream(dir + "/" + name) << "the user's";
  ACC_ASSERT_OK(acc_save_model(acc, prepared, dir.c_str(), nullptr));
  std::set<std::string> expected = users;
  expected.insert("model.safetensors");
  EXPECT_EQ(files_in(dir), expected);
  for (const auto& name : users) std::remove((dir + "/" + name).c_str());

  // Non-strict loading reports what did not match.
  acc_model* other = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"linear","in_features":16,"out_features":16},{"type":"tanh"},
                                       {"type":"linear","in_features":16,"out_features":16}])",
                                    &other));
  acc_string_list *missing = nullptr, *unexpected = nullptr;
  ACC_EXPECT_ERROR(acc_model_load_safetensors(other, (dir + "/model.safetensors").c_str(), 1, &missing, &unexpected),
                   ACC_ERR_INVALID_ARGUMENT, "unexpected keys: 3.bias");
  ACC_ASSERT_OK(acc_model_load_safetensors(other, dir.c_str(), 0, &missing, &unexpected));
  size_t n_missing = 9, n_unexpected = 0;
  ACC_ASSERT_OK(acc_string_list_size(missing, &n_missing));
  ACC_ASSERT_OK(acc_string_list_size(unexpected, &n_unexpected));
  EXPECT_EQ(n_missing, 0u);
  EXPECT_EQ(n_unexpected, 5u);
  acc_string_list_free(missing);
  acc_string_list_free(unexpected);
  ACC_EXPECT_ERROR(acc_save_model(acc, prepared, dir.c_str(), "ten gigs"), ACC_ERR_INVALID_ARGUMENT, "size");
  ACC_EXPECT_ERROR(acc_model_load_safetensors(other, "/nonexistent-dir", 0, nullptr, nullptr), ACC_ERR_IO, "");
  // An index whose weight_map names no file beside it is refused, naming the index and the entry.
  const std::string bad_index = temp_path("bad_index");
  std::filesystem::create_directories(bad_index);
  for (const char* map : {R"({"0.weight":5})", R"({"0.weight":"../model.safetensors"})", R"({"0.weight":null})"}) {
    std::ofstream(bad_index + "/model.safetensors.index.json", std::ios::trunc)
        << R"({"metadata":{"total_size":24},"weight_map":)" << map << "}";
    ACC_EXPECT_ERROR(acc_model_load_safetensors(other, bad_index.c_str(), 0, nullptr, nullptr), ACC_ERR_IO,
                     "model.safetensors.index.json': weight_map[\"0.weight\"] must name a file beside the index");
  }
  std::filesystem::remove_all(bad_index);
  for (acc_model* m : {model, prepared, fresh, other}) acc_model_free(m);
  acc_accelerator_free(acc);
  std::remove((dir + "/model.safetensors").c_str());
  rmdir(dir.c_str());
}

// Thousands of mutations of a valid file (header bytes flipped, digits changed, truncations, length
// field changes): the reader returns a tensor list or an error with a message, never crashes or
// reads out of bounds (run under ACC_SANITIZE=ON to have AddressSanitizer watch every read).
// Found by a hunt: a tensor larger than a shard closed the shard before it. As huggingface_hub's
// split_state_dict_into_shards_factory: such a tensor gets a shard of its own, listed when it comes,
// and the shard being filled stays open (listed last).
TEST(SaveModel, ATensorLargerThanAShardGetsOneOfItsOwnAsHuggingFaceHub) {
  acc_accelerator* acc = nullptr;
  ACC_ASSERT_OK(acc_accelerator_create(nullptr, &acc));
  const char* spec = R"([{"type":"linear","in_features":7,"out_features":33},{"type":"relu"},
                         {"type":"linear","in_features":33,"out_features":17},{"type":"relu"},
                         {"type":"linear","in_features":17,"out_features":3}])";
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(spec, &model));
  const std::string dir = temp_path("saved_model_large_tensor");
  // 924, 132, 2244, 68, 204 and 12 bytes into shards of 1000
  ACC_ASSERT_OK(acc_save_model(acc, model, dir.c_str(), "1KB"));
  const auto index = nlohmann::json::parse(read_file(dir + "/model.safetensors.index.json"));
  const std::map<std::string, std::string> expected = {
      {"0.weight", "model-00001-of-00003.safetensors"}, {"2.weight", "model-00002-of-00003.safetensors"},
      {"0.bias", "model-00003-of-00003.safetensors"},   {"2.bias", "model-00003-of-00003.safetensors"},
      {"4.weight", "model-00003-of-00003.safetensors"}, {"4.bias", "model-00003-of-00003.safetensors"}};
  const auto weight_map = index["weight_map"].get<std::map<std::string, std::string>>();
  EXPECT_EQ(weight_map, expected);
  acc_model* back = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(spec, &back));
  ACC_ASSERT_OK(acc_model_load_safetensors(back, dir.c_str(), 1, nullptr, nullptr));
  acc_model_free(back);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

TEST(Safetensors, MutatedAndTruncatedFilesNeverCrashTheReader) {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]},"c":{"dtype":"I64","shape":[],"data_offsets":[22,30]}})";
  const std::string valid = safetensors_bytes(header, std::string(30, '\x01'));
  // tmpfs when there is one: truncating a file on overlay file systems costs milliseconds.
  const std::string path = access("/dev/shm", W_OK) == 0
                               ? "/dev/shm/acc_fuzz_" + std::to_string(::getpid()) + ".safetensors"
                               : temp_path("fuzz.safetensors");
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&] {  // xorshift: the same mutations on every run
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  int accepted = 0, rejected = 0;
  for (int round = 0; round < 4000; ++round) {
    std::string bytes = valid;
    switch (round % 4) {
      case 0:  // random bytes anywhere in the length field and header
        for (int k = 0, n = 1 + static_cast<int>(next() % 4); k < n; ++k)
          bytes[next() % (8 + header.size())] = static_cast<char>(next());
        break;
      case 1:  // a digit of the header replaced by another digit (shapes and offsets stay JSON)
        for (size_t at = next() % bytes.size(), k = 0; k < bytes.size(); ++k, at = (at + 1) % bytes.size())
          if (at >= 8 && at < 8 + header.size() && bytes[at] >= '0' && bytes[at] <= '9') {
            bytes[at] = static_cast<char>('0' + next() % 10);
            break;
          }
        break;
      case 2:  // truncated anywhere
        bytes.resize(next() % bytes.size());
        break;
      default:  // the header length off by a little or a lot
        bytes[next() % 8] ^= static_cast<char>(1u << (next() % 8));
        break;
    }
    write_file(path, bytes);
    acc_tensor_list* out = nullptr;
    if (acc_tensor_list_load_safetensors(path.c_str(), &out) != ACC_OK) {
      ++rejected;
      EXPECT_NE(std::string(acc_last_error_message()), "");
      EXPECT_EQ(out, nullptr);
      continue;
    }
    ++accepted;
    size_t n = 0;
    ASSERT_EQ(acc_tensor_list_size(out, &n), ACC_OK);
    for (size_t i = 0; i < n; ++i) {  // touch every byte of every tensor
      acc_tensor* t = nullptr;
      ASSERT_EQ(acc_tensor_list_get(out, i, &t), ACC_OK);
      acc_tensor* sum = nullptr;
      acc_tensor* as_double = nullptr;
      ASSERT_EQ(acc_tensor_to(t, NULL, ACC_DTYPE_FLOAT64, &as_double), ACC_OK) << acc_last_error_message();
      ASSERT_EQ(acc_tensor_sum(as_double, &sum), ACC_OK);
      for (acc_tensor* x : {t, as_double, sum}) acc_tensor_free(x);
    }
    acc_tensor_list_free(out);
  }
  EXPECT_GT(rejected, 1000);  // most mutations break the file...
  EXPECT_GT(accepted, 10);    // ...and some leave it valid (e.g. a digit of a tensor value)
  std::remove(path.c_str());
}

namespace {

// Three models of one small spec (from one seed, so each has its own weights) and an accelerator
// that saves them.
struct ThreeModels {
  static constexpr const char* kSpec = R"([{"type":"linear","in_features":32,"out_features":32},{"type":"relu"},
                                          {"type":"linear","in_features":32,"out_features":16}])";
  acc_accelerator* acc = nullptr;
  acc_model* models[3] = {};

  explicit ThreeModels(uint64_t seed) {
    EXPECT_EQ(acc_accelerator_create(nullptr, &acc), ACC_OK);
    EXPECT_EQ(acc_set_seed(seed), ACC_OK);
    for (acc_model*& m : models) EXPECT_EQ(acc_model_from_spec(kSpec, &m), ACC_OK) << acc_last_error_message();
  }
  ~ThreeModels() {
    for (acc_model* m : models) acc_model_free(m);
    acc_accelerator_free(acc);
  }
  static std::vector<float> weight(acc_model* m) {
    acc_tensor* t = nullptr;
    EXPECT_EQ(acc_model_parameter(m, "2.weight", &t), ACC_OK);
    auto values = to_floats(t);
    acc_tensor_free(t);
    return values;
  }
};

}  // namespace

// A sharded save writes its shards into a staging folder and moves them in at the end: a save stopped
// on the way (its staging folder left, here with a shard of other weights) is not what loads, and
// the next save clears it.
TEST(SaveModel, AStoppedSavesStagedShardsAreNeverLoaded) {
  ThreeModels t(4);
  auto [model, other, loaded] = t.models;
  const std::string dir = temp_path("staged_save"), staging = dir + "/.accelerate-save-staging";
  ACC_ASSERT_OK(acc_save_model(t.acc, model, dir.c_str(), "1000B"));
  EXPECT_FALSE(std::filesystem::exists(staging));
  ACC_ASSERT_OK(acc_save_model(t.acc, other, staging.c_str(), "1000B"));  // as a stopped save leaves it
  ACC_ASSERT_OK(acc_model_load_safetensors(loaded, dir.c_str(), 1, nullptr, nullptr));
  EXPECT_EQ(t.weight(loaded), t.weight(model));
  ACC_ASSERT_OK(acc_save_model(t.acc, other, dir.c_str(), "1000B"));
  EXPECT_FALSE(std::filesystem::exists(staging)) << "the next save clears a stopped one's staging folder";
  ACC_ASSERT_OK(acc_model_load_safetensors(loaded, dir.c_str(), 1, nullptr, nullptr));
  EXPECT_EQ(t.weight(loaded), t.weight(other));
  std::filesystem::remove_all(dir);
}

// transformers' from_pretrained and Accelerate's load_checkpoint_in_model take model.safetensors before
// an index: so do we. A sharded save replacing a single file removes that file only after its index is
// in place, so a save stopped in between is read as the earlier save by every reader.
TEST(SaveModel, AFolderHoldingBothLayoutsIsReadFromItsSingleFileAsTransformersReadsIt) {
  ThreeModels t(5);
  auto [single, sharded, loaded] = t.models;
  const std::string dir = temp_path("both_layouts"), other = temp_path("both_layouts_single");
  ACC_ASSERT_OK(acc_save_model(t.acc, sharded, dir.c_str(), "1000B"));
  ACC_ASSERT_OK(acc_save_model(t.acc, single, other.c_str(), nullptr));
  std::filesystem::copy_file(other + "/model.safetensors", dir + "/model.safetensors");  // the stopped save's state
  ACC_ASSERT_OK(acc_model_load_safetensors(loaded, dir.c_str(), 1, nullptr, nullptr));
  EXPECT_EQ(t.weight(loaded), t.weight(single));
  EXPECT_NE(t.weight(loaded), t.weight(sharded));
  // The next sharded save leaves its own layout only.
  ACC_ASSERT_OK(acc_save_model(t.acc, sharded, dir.c_str(), "1000B"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/model.safetensors"));
  ACC_ASSERT_OK(acc_model_load_safetensors(loaded, dir.c_str(), 1, nullptr, nullptr));
  EXPECT_EQ(t.weight(loaded), t.weight(sharded));
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(other);
}

// Round trips through several shard sizes: the number of shards follows Hugging Face's rule (tensors in
// order, a new shard when the next would overflow, a tensor larger than the limit alone while the
// shard being filled stays open: 1000 B gives [0.weight] [2.weight] [0.bias 2.bias]), and every
// layout loads back to the same weights.
TEST(SaveModel, RoundTripsThroughSeveralShardSizes) {
  acc_accelerator* acc = nullptr;
  ACC_ASSERT_OK(acc_accelerator_create(nullptr, &acc));
  // Tensors in order: 0.weight 4096 B, 0.bias 128 B, 2.weight 2048 B, 2.bias 64 B.
  const char* spec = R"([{"type":"linear","in_features":32,"out_features":32},{"type":"relu"},
                         {"type":"linear","in_features":32,"out_features":16}])";
  ACC_ASSERT_OK(acc_set_seed(4));
  acc_model* model = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(spec, &model));
  struct Case {
    const char* size;
    size_t shards;
  };
  for (const Case& c : {Case{"1000B", 3}, Case{"4224", 2}, Case{"4300B", 2}, Case{"6336", 1}, Case{"10GB", 1}}) {
    const std::string dir = temp_path(std::string("shards_") + c.size);
    ACC_ASSERT_OK(acc_save_model(acc, model, dir.c_str(), c.size));
    size_t safetensors = 0;
    for (const auto& name : files_in(dir)) safetensors += name.size() > 12 && name.substr(name.size() - 12) == ".safetensors";
    EXPECT_EQ(safetensors, c.shards) << c.size;
    EXPECT_EQ(files_in(dir).count("model.safetensors.index.json"), c.shards > 1 ? 1u : 0u) << c.size;
    ACC_ASSERT_OK(acc_set_seed(99));
    acc_model* fresh = nullptr;
    ACC_ASSERT_OK(acc_model_from_spec(spec, &fresh));
    ACC_ASSERT_OK(acc_model_load_safetensors(fresh, dir.c_str(), 1, nullptr, nullptr));
    for (const char* name : {"0.weight", "0.bias", "2.weight", "2.bias"}) {
      acc_tensor *a = nullptr, *b = nullptr;
      ACC_ASSERT_OK(acc_model_parameter(model, name, &a));
      ACC_ASSERT_OK(acc_model_parameter(fresh, name, &b));
      EXPECT_EQ(to_floats(a), to_floats(b)) << c.size << " " << name;
      acc_tensor_free(a);
      acc_tensor_free(b);
    }
    acc_model_free(fresh);
    for (const auto& name : files_in(dir)) std::remove((dir + "/" + name).c_str());
    rmdir(dir.c_str());
  }
  acc_model_free(model);
  acc_accelerator_free(acc);
}

TEST(MergeShardedCheckpoint, BadArgumentsAreRefusedByName) {
  ACC_EXPECT_ERROR(acc_merge_sharded_checkpoint(nullptr, 0, "/tmp/out", nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "checkpoint_dir");
  ACC_EXPECT_ERROR(acc_merge_sharded_checkpoint("/tmp", 0, nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT, "output_dir");
  const std::string file = acc_test::temp_path("not_a_folder");
  std::ofstream(file) << "x";
  ACC_EXPECT_ERROR(acc_merge_sharded_checkpoint(file.c_str(), 0, "/tmp/out", nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "is not a checkpoint folder");
  std::remove(file.c_str());
  ACC_EXPECT_ERROR(acc_merge_sharded_checkpoint("/tmp", 0, "/tmp/out", "-3GB"), ACC_ERR_INVALID_ARGUMENT, "");
}
