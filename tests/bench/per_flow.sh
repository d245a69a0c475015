# Sourced by flow_instructions.sh and redis_instructions.sh: the table of a count per flow.
# per_flow_table HEADER FLOWS BINARY... calls the sourcing script's `count BINARY N` with N
# and with 3N flows for each binary and prints the difference over 2N: one flow's share,
# with startup and shutdown taken out.
per_flow_table() {
    local header=$1 flows=$2 binary small large
    shift 2
    printf '%-50s %16s\n' "keel-orders binary" "$header"
    for binary in "$@"; do
        small=$(count "$binary" "$flows")
        large=$(count "$binary" $((3 * flows)))
        printf '%-50s %16.0f\n' "$binary" "$(echo "($large - $small) / (2 * $flows)" | bc -l)"
    done
}
