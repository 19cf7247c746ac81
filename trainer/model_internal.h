/*
 * model_internal.h — internal to the model (model.c, model_init.c) and to nothing else: the
 * offsets of the parameters inside a dense block, which the layout, the initialization and
 * the forward/backward passes all index by, and the layout builder model_create calls.
 * model.h is the public side.
 */
#ifndef STEPSCOPE_TRAINER_MODEL_INTERNAL_H
#define STEPSCOPE_TRAINER_MODEL_INTERNAL_H

#include <stddef.h>

#include "model.h"

/* offsets (floats) inside a block */
#define BO_LN1W(m)     0
#define BO_LN1B(m)     ((size_t)(m)->C)
#define BO_LN2W(m)     (2 * (size_t)(m)->C)
#define BO_LN2B(m)     (3 * (size_t)(m)->C)
#define BO_ATTPROJB(m) (4 * (size_t)(m)->C)
#define BO_FCPROJB(m)  (5 * (size_t)(m)->C)
#define BO_QKVW(m)     (6 * (size_t)(m)->C)
#define BO_QKVB(m)     (BO_QKVW(m) + 3 * (size_t)(m)->Cl * (m)->C)
#define BO_ATTPROJW(m) (BO_QKVB(m) + 3 * (size_t)(m)->Cl)
#define BO_FCW(m)      (BO_ATTPROJW(m) + (size_t)(m)->C * (m)->Cl)
#define BO_FCB(m)      (BO_FCW(m) + 4 * (size_t)(m)->Cl * (m)->C)
#define BO_FCPROJW(m)  (BO_FCB(m) + 4 * (size_t)(m)->Cl)
#define BO_END(m)      (BO_FCPROJW(m) + (size_t)(m)->C * 4 * (m)->Cl)

/* Lays out the stage's parameters (m->params, block offsets, the flat buffer's regions);
 * model_init.c. 0, or -1 when out of memory. */
int model_build_layout(model *m, const train_config *cfg);

#endif /* STEPSCOPE_TRAINER_MODEL_INTERNAL_H */
