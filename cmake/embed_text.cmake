# Writes the text of INPUT into OUTPUT as `extern const char SYMBOL[]` (a C++ raw string).
file(READ ${INPUT} text)
file(WRITE ${OUTPUT} "// Generated from ${INPUT}; do not edit.\nextern const char ${SYMBOL}[];\nconst char ${SYMBOL}[] = R\"impulse_fbs(${text})impulse_fbs\";\n")
