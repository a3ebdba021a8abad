/* Marks attnjit's public symbols; everything else in libattnjit.so is hidden. */
#ifndef ATTNJIT_EXPORT_H_
#define ATTNJIT_EXPORT_H_
#if defined(__GNUC__) || defined(__clang__)
#define ATTNJIT_API __attribute__((visibility("default")))
#else
#define ATTNJIT_API
#endif
#endif
