// Apple SDK header, its declarations as the macOS SDK gives them (the ones PyTorch's `.mm`
// files use): OperationUtils.mm finds its embedded metallib through them. Without the
// header the parse stopped here, and nothing after it was read.
#pragma once
#include <stdint.h>

typedef int cpu_type_t;
typedef int cpu_subtype_t;

struct mach_header {
  uint32_t magic;
  cpu_type_t cputype;
  cpu_subtype_t cpusubtype;
  uint32_t filetype;
  uint32_t ncmds;
  uint32_t sizeofcmds;
  uint32_t flags;
};

struct mach_header_64 {
  uint32_t magic;
  cpu_type_t cputype;
  cpu_subtype_t cpusubtype;
  uint32_t filetype;
  uint32_t ncmds;
  uint32_t sizeofcmds;
  uint32_t flags;
  uint32_t reserved;
};
