// actors/checkpoint/megatron/zip_archive_test.cc: the zip writer and reader agree, entries
// are 64-byte aligned, CRCs are checked, and damaged archives give errors naming the file.
// (Archives from other writers — Python's zipfile and torch.save — are read in
// torch_interop_test.)
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "actors/checkpoint/file_util.h"
#include "actors/checkpoint/megatron/zip_archive.h"
#include "actors/checkpoint/test_util.h"

namespace mxmaca::actors::checkpoint::megatron {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST_CASE("Crc32 check value") {
  REQUIRE(Crc32("123456789", 9) == 0xCBF43926u);
  REQUIRE(Crc32("", 0) == 0u);
  // Continuation equals one pass.
  const std::string s = "the quick brown fox jumps over the lazy dog, twice over";
  REQUIRE(Crc32(s.data() + 10, s.size() - 10, Crc32(s.data(), 10)) == Crc32(s.data(), s.size()));
}

TEST_CASE("ZipWriter output reads back, aligned, with CRCs") {
  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/a.pt";
  auto w = ZipWriter::Create(path);
  REQUIRE(w.ok());
  REQUIRE(w->Add("a/data.pkl", "hello").ok());
  REQUIRE(w->Add("a/data/0", std::vector<absl::string_view>{"abc", "", "defgh"}).ok());
  REQUIRE(w->Add("a/version", "3\n").ok());
  REQUIRE(!w->Add("a/version", "x").ok());  // duplicate
  REQUIRE(w->Finish().ok());
  const std::string bytes = ReadAll(path);
  auto r = ZipReader::Open(bytes.data(), bytes.size(), path);
  REQUIRE(r.ok());
  REQUIRE(r->entries().size() == 3);
  const ZipEntry* e = r->Find("a/data/0");
  REQUIRE(e != nullptr);
  REQUIRE(r->Data(*e) == "abcdefgh");
  for (const ZipEntry& x : r->entries()) {
    REQUIRE(x.data_offset % 64 == 0);
    REQUIRE(r->VerifyCrc(x).ok());
  }
  REQUIRE(r->Find("nope") == nullptr);

  SECTION("a flipped data byte fails the CRC") {
    std::string bad = bytes;
    bad[e->data_offset] ^= 1;
    auto r2 = ZipReader::Open(bad.data(), bad.size(), path);
    REQUIRE(r2.ok());
    absl::Status s = r2->VerifyCrc(*r2->Find("a/data/0"));
    REQUIRE(absl::IsDataLoss(s));
    REQUIRE(std::string(s.message()).find("a/data/0") != std::string::npos);
  }
  SECTION("every truncation is an error naming the file") {
    for (size_t n = 0; n < bytes.size(); ++n) {
      auto t = ZipReader::Open(bytes.data(), n, path);
      INFO(n);
      REQUIRE(!t.ok());
      REQUIRE(std::string(t.status().message()).find(path) != std::string::npos);
    }
  }
  SECTION("not a zip") {
    const std::string junk = "\x80\x02}q\x00.this is a bare pickle, not a zip archive";
    auto t = ZipReader::Open(junk.data(), junk.size(), path);
    REQUIRE(!t.ok());
    REQUIRE(std::string(t.status().message()).find("not a zip archive") != std::string::npos);
  }
}

TEST_CASE("ZipWriter writes zip64 end records past 65535 entries") {
  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/many.zip";
  auto w = ZipWriter::Create(path);
  REQUIRE(w.ok());
  for (int i = 0; i < 70000; ++i) REQUIRE(w->Add("m/" + std::to_string(i), std::to_string(i)).ok());
  REQUIRE(w->Finish().ok());
  const std::string bytes = ReadAll(path);
  auto r = ZipReader::Open(bytes.data(), bytes.size(), path);
  REQUIRE(r.ok());
  REQUIRE(r->entries().size() == 70000);
  REQUIRE(r->Data(*r->Find("m/69999")) == "69999");
}

}  // namespace
}  // namespace mxmaca::actors::checkpoint::megatron
