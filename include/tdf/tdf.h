/// \file
/// Everything an application needs, in one include: graphs and the builder
/// (with its operators), sessions, automatic differentiation, the file
/// format and TensorFlow import, the graph transformations, DOT pictures,
/// rank placement and partitioning, and custom ops and kernels. The reference programs
/// (tdf/reference_programs.h) and the distributed session are included
/// on their own.
///
/// \code
///   #include "tdf/tdf.h"
/// \endcode
#ifndef TDF_TDF_H_
#define TDF_TDF_H_

#include "tdf/autodiff.h"
#include "tdf/builder.h"
#include "tdf/dot.h"
#include "tdf/function_op.h"
#include "tdf/graph.h"
#include "tdf/kernel.h"
#include "tdf/op_registry.h"
#include "tdf/partition.h"
#include "tdf/placement.h"
#include "tdf/serialize.h"
#include "tdf/session.h"
#include "tdf/status.h"
#include "tdf/tensor.h"
#include "tdf/tf_import.h"
#include "tdf/transform.h"
#include "tdf/validate.h"

#endif  // TDF_TDF_H_
