#pragma once

/// @file
/// Keel's structured concurrency, in one include: nurseries and join handles, channels and
/// select, cancellation tokens, the race/all/any/all_settled/timeout combinators and
/// uncancellable sections. Everything lives in keel::concurrency. The deterministic test
/// scheduler is separate: <keel/framework/concurrency/test_executor.hpp>.

#include <keel/framework/concurrency/cancellation.hpp>
#include <keel/framework/concurrency/channel.hpp>
#include <keel/framework/concurrency/combinators.hpp>
#include <keel/framework/concurrency/context.hpp>
#include <keel/framework/concurrency/errors.hpp>
#include <keel/framework/concurrency/nursery.hpp>
#include <keel/framework/concurrency/select.hpp>
#include <keel/framework/concurrency/task.hpp>
