# Warnings and sanitizers for every C target of the project.
#
# Call stepscope_target_defaults(<target>) on each target; it adds
# -Wall -Wextra (and -Werror unless STEPSCOPE_WERROR is OFF) and the
# sanitizer flags when STEPSCOPE_SANITIZE (ASan + UBSan) or STEPSCOPE_TSAN
# (ThreadSanitizer) is ON.

add_compile_definitions(_GNU_SOURCE)

if(STEPSCOPE_SANITIZE)
  set(STEPSCOPE_SANITIZER_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer
      -fno-sanitize-recover=undefined)
  foreach(flag ${STEPSCOPE_SANITIZER_FLAGS})
    add_compile_options($<$<COMPILE_LANGUAGE:C>:${flag}>)
  endforeach()
  add_link_options(${STEPSCOPE_SANITIZER_FLAGS})
endif()
if(STEPSCOPE_TSAN)
  set(STEPSCOPE_TSAN_FLAGS -fsanitize=thread -fno-omit-frame-pointer)
  foreach(flag ${STEPSCOPE_TSAN_FLAGS})
    add_compile_options($<$<COMPILE_LANGUAGE:C>:${flag}>)
  endforeach()
  add_link_options(${STEPSCOPE_TSAN_FLAGS})
endif()

function(stepscope_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter>)
  if(STEPSCOPE_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C>:-Werror>)
  endif()
endfunction()
