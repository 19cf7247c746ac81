/*
 * sc_try.h — the library wings' one early return (docs/contributing.md "Errors"): a callee's
 * non-zero status (a negative STEPSCOPE_E_* code) is returned unchanged to the caller.
 */
#ifndef SC_TRY_H
#define SC_TRY_H

#define SC_TRY(expr)                                                                               \
  do {                                                                                             \
    int sc_try_status_ = (expr);                                                                   \
    if (sc_try_status_ != 0) return sc_try_status_;                                                \
  } while (0)

#endif
