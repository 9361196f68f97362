// Apple SDK header, its declarations as the macOS SDK gives them (mach-o/loader.h says why)
#pragma once
#include <stdint.h>
#include <mach-o/loader.h>

extern "C" {
uint8_t* getsectiondata(const struct mach_header_64* mhp, const char* segname, const char* sectname,
                        unsigned long* size);
char* getsectdata(const char* segname, const char* sectname, unsigned long* size);
}
