#include <keel/test/run.hpp>
#include <stdexcept>

namespace keel::test {

void run_until(boost::asio::io_context& io, const bool& done, std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    io.restart();
    while (!done) {
        if (std::chrono::steady_clock::now() > deadline)
            throw std::runtime_error("test coroutine did not finish within the time limit");
        io.run_one_for(std::chrono::milliseconds(50));
        if (io.stopped()) io.restart();
    }
}

}  // namespace keel::test
