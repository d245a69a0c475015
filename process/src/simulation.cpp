#include <keel/process/engine.hpp>
