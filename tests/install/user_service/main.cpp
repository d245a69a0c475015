#include <keel/app/application.hpp>

#include "greeting_controller.hpp"

int main(int argc, char** argv) {
    return keel::app::application("greeter")
        .settings(+[](keel::app::settings_schema<greeter::settings>& s) {
            s.add("greeting", &greeter::settings::greeting, "how to greet");
        })
        .controllers<greeter::greeting_controller>()
        .run(argc, argv);
}
