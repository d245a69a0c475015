// The translation unit that owns one of the precompiled headers Keel's own targets share
// (keel_use_pch in keel_build.cmake). It compiles nothing else.
