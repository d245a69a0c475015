# Doxygen's input filter (Doxyfile.in): doxygen 1.9 takes the ' of a C++14 digit separator
# (5'000) for the start of a character literal, and then joins or drops the documentation
# comments that follow. Doxygen reads the headers without them; the headers stay as written.
s/([0-9])'([0-9a-fA-F])/\1\2/g
