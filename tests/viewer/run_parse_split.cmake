# run_parse_split.cmake — viewer.parse_split's driver: writes a small sample run with
# make_sample.py (once), then runs test_parse_split.js on its trace.json. Fails when
# either step fails.
if(NOT EXISTS ${WORK}/trace.json)
  execute_process(COMMAND ${PYTHON} ${SRC}/make_sample.py ${WORK} --dp 2 --pp 2 --steps 2 --microbatches 4
                  RESULT_VARIABLE rc ERROR_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "make_sample.py failed (${rc})")
  endif()
endif()
execute_process(COMMAND ${NODE} ${SRC}/test_parse_split.js ${WORK}/trace.json RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "test_parse_split.js failed (${rc})")
endif()
