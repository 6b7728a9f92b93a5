/* cucap_fatbin.h - CUDA module image parser.
 *
 * Shared by capture (the interposer must copy exactly the image the app hands
 * to cuModuleLoadData & co., and needs kernel parameter layouts when the
 * driver cannot give them) and replay (does a captured image carry code for
 * the replay GPU?). No CUDA calls, no CUDA headers: plain byte parsing.
 *
 * Images are UNTRUSTED: every offset is bounds-checked against the size the
 * caller vouches for; malformed input gives CUCAP_ERR_CORRUPT (or
 * CUCAP_ERR_TRUNCATED), never a crash. ELF is parsed with <elf.h> structures
 * directly (no libelf link dependency in schema/, which both the in-app
 * library and the fuzzer use).
 *
 * Formats (layouts in /work/shared/notes/cuda-facts.md):
 *   fatbin            u32 0xBA55ED50, u16 version, u16 header_size, u64 fat_size
 *   fatbinary wrapper u32 0x466243B1, u32 version, u64 fatbin ptr, u64 ...
 *   ELF cubin         "\x7fELF", e_machine 190 (EM_CUDA)
 *   PTX               NUL-terminated text
 *
 * Ownership: pointers in cucap_image_info / cucap_fatbin_entry point into the
 * caller's image and are valid as long as it is. Buffers returned through
 * `void **out` are malloc'ed; the caller frees them with free(). */
#ifndef CUCAP_FATBIN_H
#define CUCAP_FATBIN_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Values equal cucap.fb.ImageFormat. */
typedef enum cucap_image_format {
  CUCAP_IMAGE_UNKNOWN = 0,
  CUCAP_IMAGE_FATBIN = 1,
  CUCAP_IMAGE_CUBIN = 2,
  CUCAP_IMAGE_PTX = 3,
  CUCAP_IMAGE_FATBINARY = 4 /* wrapper struct pointing to a fatbin */
} cucap_image_format;

#define CUCAP_FATBIN_MAGIC 0xBA55ED50u
#define CUCAP_FATBINARY_MAGIC 0x466243B1u
#define CUCAP_FATBIN_FLAG_LZ4 0x2000u
#define CUCAP_FATBIN_FLAG_ZSTD 0x8000u
/* Upper bound accepted for any image or decompressed entry (sanity). */
#define CUCAP_IMAGE_MAX_SIZE ((size_t)1 << 32)

typedef struct cucap_image_info {
  cucap_image_format format;  /* format of the pointer that was given */
  size_t size;                /* exact byte size of that object (wrapper: 24) */
  /* The bytes worth storing: for FATBINARY the fatbin it points to (format
   * FATBIN), otherwise the image itself (same as format/size). */
  const void *data;
  size_t data_size;
  cucap_image_format data_format;
} cucap_image_info;

/* Detects the format of `image` and its exact size. `avail` is how many bytes
 * the caller knows to be readable (SIZE_MAX when unknown, e.g. a pointer from
 * the application, which the driver reads as well). For a FATBINARY wrapper
 * the pointed-to fatbin is read too (it must be readable: same trust as the
 * driver) - only when avail == SIZE_MAX; with a bounded avail the wrapper is
 * reported with data NULL / data_size 0 (its pointer means nothing there). Returns CUCAP_ERR_INVALID_ARG for NULL, CUCAP_ERR_UNSUPPORTED for
 * an unknown format, CUCAP_ERR_CORRUPT/TRUNCATED for a damaged one. */
cucap_status cucap_image_detect(const void *image, size_t avail,
                                cucap_image_info *out);

/* Exact size of an ELF image (max of header tables, sections and segments),
 * bounded by avail. */
cucap_status cucap_elf_size(const void *elf, size_t avail, size_t *out);

/* ---- fatbin entries -------------------------------------------------- */

typedef enum cucap_fatbin_kind {
  CUCAP_FATBIN_ENTRY_PTX = 1,
  CUCAP_FATBIN_ENTRY_ELF = 2
} cucap_fatbin_kind;

typedef enum cucap_fatbin_codec {
  CUCAP_FATBIN_CODEC_NONE = 0,
  CUCAP_FATBIN_CODEC_LZ4 = 1,
  CUCAP_FATBIN_CODEC_ZSTD = 2
} cucap_fatbin_codec;

typedef struct cucap_fatbin_entry {
  unsigned kind;              /* cucap_fatbin_kind (others passed through) */
  unsigned arch;              /* SM number, e.g. 90 */
  uint64_t flags;             /* raw entry flags */
  cucap_fatbin_codec codec;
  const uint8_t *payload;     /* bytes in the image (compressed if codec) */
  size_t payload_size;        /* compressed size when compressed */
  size_t uncompressed_size;   /* size after decompression (== payload_size if none) */
} cucap_fatbin_entry;

/* Iterates the entries of a fatbin of `size` bytes (from its header).
 * Calls fn for each; fn returns nonzero to stop early. */
typedef int (*cucap_fatbin_entry_fn)(const cucap_fatbin_entry *e, void *user);
cucap_status cucap_fatbin_foreach(const void *fatbin, size_t size,
                                  cucap_fatbin_entry_fn fn, void *user);

/* The entry's plain contents: *out is malloc'ed (caller frees), *out_size
 * its size. Uncompressed entries are copied too (uniform ownership). */
cucap_status cucap_fatbin_entry_data(const cucap_fatbin_entry *e, void **out,
                                     size_t *out_size);

/* ---- keeping only the code some devices need ---------------------------- */

typedef struct cucap_fatbin_select_stats {
  size_t entries, kept;          /* entries in the input / in the output */
  size_t elf_kept, ptx_kept;     /* of those kept: ELF, PTX */
} cucap_fatbin_select_stats;

/* A copy of a fatbin of `size` bytes holding only what devices of compute
 * capabilities sms[0..nsms) (e.g. 90) can load: for each sm, every ELF
 * entry of the highest SASS arch that runs there (same major, minor <= the
 * device's: what the driver picks), and every PTX entry of the highest
 * virtual arch <= sm (what the driver JITs when no SASS fits, and what lets
 * a newer GPU run the image). Entries of other kinds are kept. Entries are
 * copied byte for byte (headers and compressed payloads unchanged); the
 * header's size is rewritten; every kept entry keeps its offset modulo 8.
 * *out is malloc'ed (caller frees), *out_size its size. *out is NULL with
 * CUCAP_OK when nothing would be dropped, when some sm would be left with
 * no code (the image is better kept whole), or when an entry's alignment
 * could not be kept. CUCAP_ERR_CORRUPT/TRUNCATED/UNSUPPORTED for a damaged
 * or non-fatbin input (nothing allocated). stats may be NULL. */
cucap_status cucap_fatbin_select(const void *fatbin, size_t size, const unsigned *sms,
                                 size_t nsms, void **out, size_t *out_size,
                                 cucap_fatbin_select_stats *stats);

/* The code a device of compute capability sm (e.g. 90) runs from a fatbin
 * of `size` bytes, as a plain ELF cubin: when the fatbin holds exactly one
 * ELF entry of the highest SASS arch that runs there (what the driver
 * loads; PTX is then not JIT-compiled), no entry of a kind this parser does
 * not judge, and that entry is compressed. *out is malloc'ed (caller
 * frees), *out_size its size; *out is NULL with CUCAP_OK when any of that
 * does not hold (load the fatbin as it is). CUCAP_ERR_CORRUPT/TRUNCATED/
 * UNSUPPORTED/DECOMPRESS for a damaged or non-fatbin input (nothing
 * allocated). */
cucap_status cucap_fatbin_device_elf(const void *fatbin, size_t size, unsigned sm,
                                     void **out, size_t *out_size);

/* LZ4 block (no frame) decoder: decodes src into exactly dst_size bytes.
 * CUCAP_ERR_DECOMPRESS on malformed input or size mismatch. */
cucap_status cucap_lz4_block_decode(const uint8_t *src, size_t src_size,
                                    uint8_t *dst, size_t dst_size);

/* ---- cubin kernels and parameter layouts -------------------------------- */

typedef struct cucap_param_layout {
  uint32_t offset;
  uint32_t size;
} cucap_param_layout;

/* Calls fn(name, user) for every kernel (a `.nv.info.<name>` section) of an
 * ELF cubin; name is valid during the call. fn returns nonzero to stop. */
typedef int (*cucap_kernel_fn)(const char *name, void *user);
cucap_status cucap_cubin_foreach_kernel(const void *elf, size_t size,
                                        cucap_kernel_fn fn, void *user);

/* Parameter layout of `kernel` in an ELF cubin from .nv.info.<kernel>:
 * params sorted by ordinal into out[0..max) (*count = number of params, which
 * may exceed max: then only max are written), *total_bytes from
 * EIATTR_CBANK_PARAM_SIZE (or end of the last param if absent).
 * CUCAP_ERR_NOT_FOUND if the cubin has no such kernel. */
cucap_status cucap_cubin_kernel_params(const void *elf, size_t size,
                                       const char *kernel,
                                       cucap_param_layout *out, size_t max,
                                       size_t *count, uint32_t *total_bytes);

/* Same for any image format: a cubin directly, a fatbin (each ELF entry,
 * decompressed as needed, until one has the kernel). PTX is not parsed
 * (CUCAP_ERR_NOT_FOUND). */
cucap_status cucap_image_kernel_params(const void *image, size_t size,
                                       const char *kernel,
                                       cucap_param_layout *out, size_t max,
                                       size_t *count, uint32_t *total_bytes);

/* Symbol-table indices of functions of an ELF cubin: for each names[i], the
 * index in .symtab of the STT_FUNC symbol of that name (what `nvdisasm -fun`
 * takes), or UINT32_MAX when there is none. Returns how many were found;
 * 0 for a malformed or symbol-less ELF. */
size_t cucap_cubin_function_symbols(const void *elf, size_t size,
                                    const char *const *names, size_t n,
                                    uint32_t *idx);

/* 1 if the ELF cubin carries source line information (.debug_line or
 * .nv_debug_line_sass: built with -lineinfo or -G), else 0. */
int cucap_cubin_has_line_info(const void *elf, size_t size);

/* SM of an ELF cubin from e_flags (ABI 8: bits 8-15; older: low byte). */
cucap_status cucap_cubin_arch(const void *elf, size_t size, unsigned *sm);

/* 1 if the image can run on compute capability `sm` (e.g. 90): SASS of the
 * same major with minor <= the target's (CUDA binary compatibility), or PTX
 * for an arch <= sm (JIT). 0 if not; a bare PTX image is checked against its
 * `.target sm_NN` line (1 when absent). Malformed images give 0. */
int cucap_image_has_code_for(const void *image, size_t size, unsigned sm);

/* ---- device variables ------------------------------------------------- */

/* Calls fn(name, size, user) for every variable the driver places in device
 * memory when it loads an ELF cubin: __device__ (initialised or not),
 * __managed__ and __constant__ variables (object symbols of .nv.global*,
 * .nv.constantN with N > 0). name is valid during the call; fn returns
 * nonzero to stop. CUCAP_ERR_CORRUPT for a damaged symbol table. */
typedef int (*cucap_var_fn)(const char *name, uint64_t size, void *user);
cucap_status cucap_cubin_foreach_variable(const void *elf, size_t size,
                                          cucap_var_fn fn, void *user);

/* The same for the code a device of compute capability `sm` loads from an
 * image: a cubin's own, or a fatbin's ELF entries of the SASS arch the
 * driver picks (same major, the highest minor <= sm's). CUCAP_ERR_UNSUPPORTED
 * for PTX and for a fatbin without SASS for sm: the driver would JIT it and
 * its variables are not known without compiling. */
cucap_status cucap_image_foreach_variable(const void *image, size_t size,
                                          unsigned sm, cucap_var_fn fn,
                                          void *user);

#ifdef __cplusplus
}
#endif
#endif
