// data/indexed_dataset_test.cc: round trips, merging, atomic writes, validation errors
// and 64-bit offsets of the Megatron indexed dataset.
#include "data/indexed_dataset.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace mxmaca::data {
namespace {

std::string MakeTempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string templ = std::string(base != nullptr ? base : "/tmp") + "/idxtest.XXXXXX";
  REQUIRE(::mkdtemp(templ.data()) != nullptr);
  return templ;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A random corpus: documents of 0..3 sequences (so empty documents occur), sequences of
// 0..40 tokens drawn from [0, max_token].
using Document = std::vector<std::vector<int32_t>>;
std::vector<Document> RandomCorpus(std::mt19937_64& rng, int num_docs, int32_t max_token) {
  std::uniform_int_distribution<int> num_seq(0, 3);
  std::uniform_int_distribution<int> seq_len(0, 40);
  std::uniform_int_distribution<int32_t> token(0, max_token);
  std::vector<Document> docs(num_docs);
  for (Document& doc : docs) {
    doc.resize(num_seq(rng));
    for (auto& seq : doc) {
      seq.resize(seq_len(rng));
      for (int32_t& t : seq) t = token(rng);
    }
  }
  return docs;
}

void WriteCorpus(IndexedDatasetBuilder& builder, const std::vector<Document>& docs) {
  for (const Document& doc : docs) {
    for (const auto& seq : doc) REQUIRE(builder.AddItem(seq).ok());
    builder.EndDocument();
  }
}

// Checks every index entry and every token of `ds` against `docs`.
void ExpectCorpus(const IndexedDataset& ds, const std::vector<Document>& docs) {
  REQUIRE(ds.num_documents() == static_cast<int64_t>(docs.size()));
  const int64_t item = DTypeSize(ds.dtype());
  int64_t seq = 0;
  int64_t pointer = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    REQUIRE(ds.document_index(d) == seq);
    for (const auto& tokens : docs[d]) {
      REQUIRE(ds.sequence_length(seq) == static_cast<int32_t>(tokens.size()));
      REQUIRE(ds.sequence_pointer(seq) == pointer);
      auto got = ds.Get(seq);
      REQUIRE(got.ok());
      REQUIRE(*got == tokens);
      pointer += static_cast<int64_t>(tokens.size()) * item;
      ++seq;
    }
  }
  REQUIRE(ds.document_index(docs.size()) == seq);
  REQUIRE(ds.num_sequences() == seq);
  REQUIRE(ds.bin_size() == pointer);
}

TEST_CASE("DTypeForVocab follows Megatron's optimal_dtype") {
  CHECK(DTypeForVocab(50257) == DType::kUint16);  // GPT-2
  CHECK(DTypeForVocab(65499) == DType::kUint16);
  CHECK(DTypeForVocab(65500) == DType::kInt32);
  CHECK(DTypeForVocab(128256) == DType::kInt32);  // Llama 3
  CHECK(DTypeSize(DType::kUint16) == 2);
  CHECK(DTypeSize(DType::kInt64) == 8);
  CHECK(static_cast<int>(DType::kUint16) == 8);
}

TEST_CASE("random corpus round-trips through builder and reader, both dtypes") {
  std::mt19937_64 rng(0x1d7a5e7);
  for (DType dtype : {DType::kUint16, DType::kInt32}) {
    const int32_t max_token = dtype == DType::kUint16 ? 65535 : 2147483647;
    const std::string prefix = MakeTempDir() + "/corpus";
    auto docs = RandomCorpus(rng, 200, max_token);
    auto builder = IndexedDatasetBuilder::Create(prefix, dtype);
    REQUIRE(builder.ok());
    WriteCorpus(**builder, docs);
    REQUIRE((*builder)->Finalize().ok());
    CHECK_FALSE((*builder)->Finalize().ok());  // twice is an error

    auto ds = IndexedDataset::Open(prefix);
    REQUIRE(ds.ok());
    CHECK((*ds)->dtype() == dtype);
    ExpectCorpus(**ds, docs);

    // Partial reads, GetInto, zero-copy pointer and bulk copies agree with the corpus.
    std::uniform_int_distribution<int64_t> pick(0, (*ds)->num_sequences() - 1);
    const auto lengths = (*ds)->sequence_lengths();
    const auto pointers = (*ds)->sequence_pointers();
    const auto doc_indices = (*ds)->document_indices();
    REQUIRE(doc_indices.size() == docs.size() + 1);
    for (int trial = 0; trial < 100; ++trial) {
      const int64_t s = pick(rng);
      REQUIRE(lengths[s] == (*ds)->sequence_length(s));
      REQUIRE(pointers[s] == (*ds)->sequence_pointer(s));
      const int64_t len = lengths[s];
      if (len == 0) continue;
      auto full = (*ds)->Get(s);
      REQUIRE(full.ok());
      const int64_t off = std::uniform_int_distribution<int64_t>(0, len - 1)(rng);
      const int64_t n = std::uniform_int_distribution<int64_t>(0, len - off)(rng);
      auto part = (*ds)->Get(s, off, n);
      REQUIRE(part.ok());
      CHECK(*part == std::vector<int32_t>(full->begin() + off, full->begin() + off + n));
      std::vector<int32_t> buffer(n);
      REQUIRE((*ds)->GetInto(s, off, absl::MakeSpan(buffer)).ok());
      CHECK(buffer == *part);
      const void* raw = (*ds)->SequenceData(s);
      for (int64_t i = 0; i < len; ++i) {
        const int32_t v = dtype == DType::kUint16
                              ? static_cast<const uint16_t*>(raw)[i]
                              : static_cast<const int32_t*>(raw)[i];
        REQUIRE(v == (*full)[i]);
      }
      CHECK_FALSE((*ds)->Get(s, off, len - off + 1).ok());
      CHECK_FALSE((*ds)->Get(s, -1, 1).ok());
    }
    CHECK_FALSE((*ds)->Get(-1).ok());
    CHECK_FALSE((*ds)->Get((*ds)->num_sequences()).ok());
  }
}

TEST_CASE("AddDocument equals AddItem + EndDocument; an empty dataset is valid") {
  std::mt19937_64 rng(42);
  const std::string dir = MakeTempDir();
  auto docs = RandomCorpus(rng, 50, 50256);
  auto a = IndexedDatasetBuilder::Create(dir + "/a", DType::kUint16);
  auto b = IndexedDatasetBuilder::Create(dir + "/b", DType::kUint16);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  WriteCorpus(**a, docs);
  for (const Document& doc : docs) {
    std::vector<int32_t> flat, lengths;
    for (const auto& seq : doc) {
      flat.insert(flat.end(), seq.begin(), seq.end());
      lengths.push_back(static_cast<int32_t>(seq.size()));
    }
    REQUIRE((*b)->AddDocument(flat, lengths).ok());
  }
  std::vector<int32_t> bad_lengths = {1, 2};
  CHECK((*b)->AddDocument(std::vector<int32_t>{1}, bad_lengths).code() ==
        absl::StatusCode::kInvalidArgument);
  REQUIRE((*a)->Finalize().ok());
  REQUIRE((*b)->Finalize().ok());
  CHECK(ReadFile(dir + "/a.bin") == ReadFile(dir + "/b.bin"));
  CHECK(ReadFile(dir + "/a.idx") == ReadFile(dir + "/b.idx"));

  auto empty = IndexedDatasetBuilder::Create(dir + "/empty", DType::kInt32);
  REQUIRE(empty.ok());
  REQUIRE((*empty)->Finalize().ok());
  auto ds = IndexedDataset::Open(dir + "/empty");
  REQUIRE(ds.ok());
  CHECK((*ds)->num_sequences() == 0);
  CHECK((*ds)->num_documents() == 0);
  CHECK(ReadFile(dir + "/empty.idx").size() == 34 + 8);
}

TEST_CASE("tokens outside the dtype are rejected, not wrapped") {
  const std::string dir = MakeTempDir();
  auto builder = IndexedDatasetBuilder::Create(dir + "/x", DType::kUint16);
  REQUIRE(builder.ok());
  std::vector<int32_t> too_big = {1, 65536};
  std::vector<int32_t> negative = {-1};
  absl::Status status = (*builder)->AddItem(too_big);
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  CHECK(status.message().find("65536") != std::string::npos);
  CHECK((*builder)->AddItem(negative).code() == absl::StatusCode::kInvalidArgument);
  CHECK((*builder)->num_sequences() == 0);
  CHECK((*builder)->bytes_written() == 0);
  CHECK(IndexedDatasetBuilder::Create(dir + "/f", DType::kFloat32).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("AddIndex merges datasets like Megatron's add_index") {
  std::mt19937_64 rng(7);
  const std::string dir = MakeTempDir();
  auto part1 = RandomCorpus(rng, 30, 50256);
  auto part2 = RandomCorpus(rng, 40, 50256);
  auto middle = RandomCorpus(rng, 5, 50256);
  for (auto [name, docs] : {std::pair{"p1", &part1}, std::pair{"p2", &part2}}) {
    auto b = IndexedDatasetBuilder::Create(dir + "/" + name, DType::kUint16);
    REQUIRE(b.ok());
    WriteCorpus(**b, *docs);
    REQUIRE((*b)->Finalize().ok());
  }
  auto merged = IndexedDatasetBuilder::Create(dir + "/merged", DType::kUint16);
  REQUIRE(merged.ok());
  REQUIRE((*merged)->AddIndex(dir + "/p1").ok());
  WriteCorpus(**merged, middle);
  REQUIRE((*merged)->AddIndex(dir + "/p2").ok());
  REQUIRE((*merged)->Finalize().ok());

  std::vector<Document> all = part1;
  all.insert(all.end(), middle.begin(), middle.end());
  all.insert(all.end(), part2.begin(), part2.end());
  auto direct = IndexedDatasetBuilder::Create(dir + "/direct", DType::kUint16);
  REQUIRE(direct.ok());
  WriteCorpus(**direct, all);
  REQUIRE((*direct)->Finalize().ok());
  CHECK(ReadFile(dir + "/merged.bin") == ReadFile(dir + "/direct.bin"));
  CHECK(ReadFile(dir + "/merged.idx") == ReadFile(dir + "/direct.idx"));
  auto ds = IndexedDataset::Open(dir + "/merged");
  REQUIRE(ds.ok());
  ExpectCorpus(**ds, all);

  // Merging another dtype, a missing dataset or a .bin with stray bytes fails.
  auto other = IndexedDatasetBuilder::Create(dir + "/i32", DType::kInt32);
  REQUIRE(other.ok());
  CHECK((*other)->AddIndex(dir + "/p1").code() == absl::StatusCode::kInvalidArgument);
  CHECK((*other)->AddIndex(dir + "/nothing").code() == absl::StatusCode::kNotFound);
  WriteFile(dir + "/p1.bin", ReadFile(dir + "/p1.bin") + "xy");
  auto again = IndexedDatasetBuilder::Create(dir + "/again", DType::kUint16);
  REQUIRE(again.ok());
  CHECK((*again)->AddIndex(dir + "/p1").code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("files appear only at Finalize; an abandoned builder leaves nothing") {
  const std::string dir = MakeTempDir();
  {
    auto builder = IndexedDatasetBuilder::Create(dir + "/tmp", DType::kUint16);
    REQUIRE(builder.ok());
    REQUIRE((*builder)->AddItem(std::vector<int32_t>{5, 6, 7}).ok());
    (*builder)->EndDocument();
    CHECK(::access((dir + "/tmp.bin").c_str(), F_OK) != 0);
    CHECK(::access((dir + "/tmp.idx").c_str(), F_OK) != 0);
  }
  // The directory is empty again: only "." and "..".
  int entries = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (::readdir(d) != nullptr) ++entries;
    ::closedir(d);
  }
  CHECK(entries == 2);
}

// Builds a small valid dataset and returns its prefix; 3 documents: [2 seqs], [], [1 seq].
std::string SmallDataset(const std::string& dir) {
  auto b = IndexedDatasetBuilder::Create(dir + "/small", DType::kUint16);
  REQUIRE(b.ok());
  REQUIRE((*b)->AddItem(std::vector<int32_t>{11, 12, 13}).ok());
  REQUIRE((*b)->AddItem(std::vector<int32_t>{14}).ok());
  (*b)->EndDocument();
  (*b)->EndDocument();
  REQUIRE((*b)->AddItem(std::vector<int32_t>{15, 16}).ok());
  (*b)->EndDocument();
  REQUIRE((*b)->Finalize().ok());
  return dir + "/small";
}

template <typename T>
void Poke(std::string& bytes, size_t offset, T value) {
  std::memcpy(&bytes[offset], &value, sizeof(T));
}

// Opens `prefix` after replacing its .idx by `idx`; expects `code` and a message
// containing every string of `needles`.
void ExpectOpenError(const std::string& prefix, const std::string& idx,
                     absl::StatusCode code, std::vector<std::string> needles) {
  WriteFile(prefix + ".idx", idx);
  auto ds = IndexedDataset::Open(prefix);
  REQUIRE_FALSE(ds.ok());
  INFO(ds.status().ToString());
  CHECK(ds.status().code() == code);
  needles.push_back(prefix + ".idx");
  for (const std::string& needle : needles) {
    CHECK(ds.status().message().find(needle) != std::string::npos);
  }
}

TEST_CASE("Open validates the index and names file, byte offset and expectation") {
  const std::string prefix = SmallDataset(MakeTempDir());
  const std::string good = ReadFile(prefix + ".idx");
  // Layout: header 34, lengths 3*4 at 34, pointers 3*8 at 46, doc indices 4*8 at 70.
  REQUIRE(good.size() == 34 + 12 + 24 + 32);
  {
    auto ds = IndexedDataset::Open(prefix);
    REQUIRE(ds.ok());
    CHECK((*ds)->document_indices() == std::vector<int64_t>{0, 2, 2, 3});
  }
  const auto kLoss = absl::StatusCode::kDataLoss;
  std::string bad = good;
  bad[3] = 'X';
  ExpectOpenError(prefix, bad, kLoss, {"magic", "byte 0"});
  bad = good;
  Poke<uint64_t>(bad, 9, 2);
  ExpectOpenError(prefix, bad, kLoss, {"version 2", "byte 9", "expected 1"});
  bad = good;
  bad[17] = 9;
  ExpectOpenError(prefix, bad, kLoss, {"dtype code 9", "byte 17"});
  ExpectOpenError(prefix, good.substr(0, 20), kLoss, {"truncated header", "34"});
  ExpectOpenError(prefix, good.substr(0, good.size() - 1), kLoss, {"truncated"});
  bad = good;
  Poke<uint64_t>(bad, 18, uint64_t{1} << 62);  // absurd sequence count
  ExpectOpenError(prefix, bad, kLoss, {"truncated", "4611686018427387904 sequences"});
  ExpectOpenError(prefix, good + "abcde", kLoss, {"unexpected bytes", "byte 102"});
  bad = good;
  Poke<int64_t>(bad, 70, 1);
  ExpectOpenError(prefix, bad, kLoss, {"document index 0 is 1", "byte 70", "expected 0"});
  bad = good;
  Poke<int64_t>(bad, 86, 1);  // [0, 2, 1, 3]
  ExpectOpenError(prefix, bad, kLoss, {"document index 2 is 1", "byte 86"});
  bad = good;
  Poke<int64_t>(bad, 94, 2);  // [0, 2, 2, 2]
  ExpectOpenError(prefix, bad, kLoss, {"last document index is 2", "byte 94", "expected 3"});
  bad = good;
  Poke<int64_t>(bad, 62, 9);  // odd pointer for uint16
  ExpectOpenError(prefix, bad, kLoss, {"pointer 9", "byte 62", "multiple of 2"});
  bad = good;
  Poke<int64_t>(bad, 62, 10);  // 10 + 2*2 > 12-byte .bin
  ExpectOpenError(prefix, bad, kLoss, {"past the end", "small.bin", "byte 62"});
  bad = good;
  Poke<int32_t>(bad, 38, -4);
  ExpectOpenError(prefix, bad, kLoss, {"length -4", "byte 38"});
  // Trailing bytes equal to N are the multimodal modes array.
  WriteFile(prefix + ".idx", good + std::string("\x01\x02\x03", 3));
  auto modal = IndexedDataset::Open(prefix);
  REQUIRE(modal.ok());
  CHECK((*modal)->has_sequence_modes());
  CHECK((*modal)->sequence_mode(2) == 3);
  // Missing files.
  WriteFile(prefix + ".idx", good);
  REQUIRE(::unlink((prefix + ".bin").c_str()) == 0);
  auto no_bin = IndexedDataset::Open(prefix);
  CHECK(no_bin.status().code() == absl::StatusCode::kNotFound);
  CHECK(no_bin.status().message().find(prefix + ".bin") != std::string::npos);
  CHECK(IndexedDataset::Open(prefix + "_none").status().code() ==
        absl::StatusCode::kNotFound);
}

TEST_CASE("64-bit offsets: a sparse .bin over 4 GiB with more than 2^31 tokens") {
  // Three uint16 sequences of 2^30 + 7 tokens each: 3.2e9 tokens, 6.4 GB of .bin, as a
  // sparse file (no disk blocks except the few tokens written below).
  const std::string dir = MakeTempDir();
  const std::string prefix = dir + "/big";
  const int64_t len = (int64_t{1} << 30) + 7;
  const int64_t n = 3;
  const int64_t bin_size = n * len * 2;
  REQUIRE(bin_size > (int64_t{1} << 32));
  const int fd = ::open((prefix + ".bin").c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, bin_size) == 0);
  // Known tokens at the start and end of the last sequence (byte offsets > 2^32).
  const uint16_t head[3] = {101, 102, 103};
  const uint16_t tail[2] = {65534, 7};
  const int64_t last = 2 * len * 2;
  REQUIRE(::pwrite(fd, head, sizeof(head), last) == sizeof(head));
  REQUIRE(::pwrite(fd, tail, sizeof(tail), bin_size - 4) == sizeof(tail));
  ::close(fd);

  std::string idx("MMIDIDX\0\0", 9);
  auto put = [&idx](const void* p, size_t size) {
    idx.append(static_cast<const char*>(p), size);
  };
  const uint64_t version = 1, count = n, docs = 3;
  const uint8_t code = 8;
  put(&version, 8);
  put(&code, 1);
  put(&count, 8);
  put(&docs, 8);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t l = static_cast<int32_t>(len);
    put(&l, 4);
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = i * len * 2;
    put(&p, 8);
  }
  for (int64_t d : {int64_t{0}, int64_t{1}, int64_t{3}}) put(&d, 8);
  WriteFile(prefix + ".idx", idx);

  auto ds = IndexedDataset::Open(prefix);
  REQUIRE(ds.ok());
  CHECK((*ds)->bin_size() == bin_size);
  CHECK((*ds)->sequence_pointer(2) == last);
  auto got_head = (*ds)->Get(2, 0, 3);
  REQUIRE(got_head.ok());
  CHECK(*got_head == std::vector<int32_t>{101, 102, 103});
  auto got_tail = (*ds)->Get(2, len - 3, 3);
  REQUIRE(got_tail.ok());
  CHECK(*got_tail == std::vector<int32_t>{0, 65534, 7});
  CHECK(static_cast<const uint16_t*>((*ds)->SequenceData(2))[len - 1] == 7);

  // One token more in the last sequence runs past the end of the .bin.
  const int32_t longer = static_cast<int32_t>(len + 1);
  std::memcpy(&idx[34 + 8], &longer, 4);
  WriteFile(prefix + ".idx", idx);
  auto bad = IndexedDataset::Open(prefix);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find(std::to_string(bin_size + 2)) != std::string::npos);
}

}  // namespace
}  // namespace mxmaca::data
