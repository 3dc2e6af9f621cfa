// A small reader and writer of NumPy .npy files (format versions 1.0, 2.0 and 3.0), for the
// tensors `flashjit run` loads and saves. C order only; little-endian data only.
//
// Element types flashjit uses:  '<f2' fp16,  '<u2' bf16 as raw bit patterns (NumPy has no
// bfloat16; ml_dtypes' bfloat16 arrays, descr '<V2', are accepted when reading),  '<f4' fp32.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace flashjit::cli {

// What the reader accepts: at most 32 dimensions of at most 2^48 each, a header of at most
// 64 KiB and data of at most 1 TiB (a size that does not fit is an error, never a wrap-around).
inline constexpr size_t kMaxNpyDims = 32;
inline constexpr int64_t kMaxNpyDim = int64_t(1) << 48;
inline constexpr size_t kMaxNpyHeaderBytes = 64 * 1024;
inline constexpr uint64_t kMaxNpyDataBytes = uint64_t(1) << 40;

// Any problem with a .npy file; the message names the file.
class NpyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct NpyArray {
  std::string descr;           // as in the header, e.g. "<f2"
  std::vector<int64_t> shape;  // C order
  std::string data;            // raw little-endian bytes, elements() * item_size()

  int64_t elements() const;  // throws NpyError when the shape exceeds the limits
  int item_size() const;  // from descr
  std::string shape_string() const;  // "(2, 128, 8, 64)"
};

// Parses the header dict and checks it: fortran_order must be False, the byte order
// little-endian (or not applicable), and the data exactly elements * item size. read_npy reads
// only as much as the header declares.
NpyArray read_npy(const std::string& path);
NpyArray parse_npy(const std::string& bytes, const std::string& origin);

// Writes a version 1.0 file (2.0 when the header needs it).
void write_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
               const void* data, size_t bytes);
std::string encode_npy(const std::string& descr, const std::vector<int64_t>& shape, const void* data,
                       size_t bytes);

std::string shape_string(const std::vector<int64_t>& shape);

// shape's element count x item_size in `bytes`; false when a dimension is negative or the size
// exceeds kMaxNpyDataBytes.
bool npy_bytes(const std::vector<int64_t>& shape, int item_size, uint64_t& bytes);

}  // namespace flashjit::cli
