/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The library's flow macros (house style section 5; zstd's FORWARD_IF_ERROR
 * and RETURN_ERROR_IF are the model). There are four, and no others:
 *
 *   GS_CHECK(expr)                      return expr's status when it is not GS_OK
 *   GS_CHECK_GOTO(expr, status, label)  set status to expr's, and jump when not GS_OK
 *   GS_RETURN_ERR_IF(cond, code, ...)   record the sentence "..." and return code
 *   GS_ASSERT(cond)                     an internal invariant (debug/sanitizer builds)
 *
 * None of them replaces the callee's status, and the forwarding ones leave
 * the callee's sentence (gs_last_error) as it is: the code that first finds
 * an error writes its sentence, once. Use them where they make a function
 * shorter, not everywhere: a sequence of `if (status == GS_OK)` steps that
 * share one cleanup is often clearer as it is.
 *
 * GS_ASSERT is for invariants of the library's own state only: never for a
 * caller's argument or a peer's bytes, which get an error value. It is
 * compiled in when GS_ENABLE_ASSERT is defined (CMake's GS_ASSERTS option: on
 * in Debug and sanitizer builds, off in release builds, where the condition
 * is not evaluated). A failed assertion is a bug in gradsync: it logs the
 * condition with its file and line and aborts, so that a debugger or the
 * sanitizer's report shows where.
 */
#ifndef GS_CORE_CHECK_H
#define GS_CORE_CHECK_H

#include "core/error.h"
#include "core/log.h"

#define GS_CHECK(_expr)                                                                            \
    do {                                                                                           \
        const gs_status_t gs__check_status_ = (_expr);                                             \
        if (gs__check_status_ != GS_OK) {                                                          \
            return gs__check_status_;                                                              \
        }                                                                                          \
    } while (0)

#define GS_CHECK_GOTO(_expr, _status, _label)                                                      \
    do {                                                                                           \
        (_status) = (_expr);                                                                       \
        if ((_status) != GS_OK) {                                                                  \
            goto _label;                                                                           \
        }                                                                                          \
    } while (0)

#define GS_RETURN_ERR_IF(_cond, _code, ...)                                                        \
    do {                                                                                           \
        if (_cond) {                                                                               \
            return gs__error_set((_code), __VA_ARGS__);                                            \
        }                                                                                          \
    } while (0)

#ifdef GS_ENABLE_ASSERT
/* Logs and aborts (debug and sanitizer builds only; see above). */
void gs__assert_fail(const char *cond, const char *file, int line) __attribute__((noreturn));
#define GS_ASSERT(_cond)                                                                           \
    do {                                                                                           \
        if (!(_cond)) {                                                                            \
            gs__assert_fail(#_cond, __FILE__, __LINE__);                                           \
        }                                                                                          \
    } while (0)
#else
#define GS_ASSERT(_cond) ((void)sizeof(!(_cond)))
#endif

#endif /* GS_CORE_CHECK_H */
