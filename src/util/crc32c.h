// crc32c.h: CRC-32C (Castagnoli), the checksum of checkpoint files (src/io/ckpt_verify.h).
// Chosen over sha256 for speed: AVX-512 carry-less-multiply folding (VPCLMULQDQ) ran at
// up to 56 GB/s on cached data on the shared 2-core test Xeon (tests/tool_ckpt_bench's
// crc32c line; the fallback, SSE4.2's crc32 instruction on three interleaved streams, about a
// quarter of that: CFLAGS="-O3 -march=native -mno-vpclmulqdq" to measure it), so checking
// a checkpoint costs a fraction of reading it. Standard parameters (reflected, poly
// 0x1EDC6F41, init and xorout ~0): crc32c(0, "123456789", 9) == 0xE3069283, the check
// value of iSCSI's and ext4's CRC-32C.
#ifndef OLMO_CRC32C_H
#define OLMO_CRC32C_H

#include <stddef.h>
#include <stdint.h>

// CRC of buf[0..len) continuing from crc (0 to start): crc32c(crc32c(0, a), b) = crc32c(0, a||b).
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);
// CRC of a||b from crc32c(0, a), crc32c(0, b) and b's length: how the ranks of a sharded
// checkpoint, each checksumming its own byte range, give the CRC of a whole region.
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, size_t len_b);
// The portable bytewise version (the reference the hardware path is tested against).
uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len);

#endif
