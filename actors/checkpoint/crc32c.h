// actors/checkpoint/crc32c.h: CRC-32C (Castagnoli), the checksum of each stored tensor box
// in a checkpoint. Polynomial 0x1EDC6F41 (reflected 0x82F63B78), initial value and final
// xor 0xFFFFFFFF, as in iSCSI (RFC 3720), TFRecord and Python's `crc32c` package; check
// value Crc32c("123456789") = 0xE3069283. Uses the SSE4.2 crc32 instruction when the build
// targets it (x86-64-v3 does), else a table.
#ifndef MXMACA_ACTORS_CHECKPOINT_CRC32C_H_
#define MXMACA_ACTORS_CHECKPOINT_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace mxmaca::actors::checkpoint {

// Crc32c: the CRC-32C of `size` bytes at `data`, continuing from `crc` (the CRC of the bytes
// before them; 0 for none): Crc32c(b, n2, Crc32c(a, n1)) == CRC-32C of a then b.
uint32_t Crc32c(const void* data, size_t size, uint32_t crc = 0);

}  // namespace mxmaca::actors::checkpoint

#endif  // MXMACA_ACTORS_CHECKPOINT_CRC32C_H_
