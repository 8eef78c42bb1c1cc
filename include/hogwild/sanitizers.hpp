#pragma once
// Which sanitizer this translation unit is compiled under, for GCC and clang alike:
// GCC defines __SANITIZE_ADDRESS__ and __SANITIZE_THREAD__, clang (before 16) only
// answers __has_feature. HOGWILD_ASAN and HOGWILD_TSAN are 1 under ASan and TSan.

#if defined(__SANITIZE_ADDRESS__)
#define HOGWILD_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HOGWILD_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define HOGWILD_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HOGWILD_TSAN 1
#endif
#endif
