"""The custom operators' records (MediaPipe's, TFLite's detection post-processing and audio
ops, TFLite Micro's Signal ops), by custom code; ``tflite2qonnx.ops`` joins them to the builtins.
"""

from __future__ import annotations

from tflite2qonnx.ops.record import DEQUANTIZES, Op

CUSTOM_OPERATORS: dict[str, Op] = {
    "AudioSpectrogram": Op("signal.audio:audio_spectrogram"),
    "Convolution2DTransposeBias": Op("detection.mediapipe:convolution_2d_transpose_bias"),
    "Landmarks2TransformMatrix": Op("detection.mediapipe_transform:landmarks_to_transform_matrix"),
    "MaxPoolingWithArgmax2D": Op("detection.mediapipe:max_pooling_with_argmax_2d"),
    "MaxUnpooling2D": Op("detection.mediapipe:max_unpooling_2d"),
    "Mfcc": Op("signal.audio:mfcc"),
    # TFLite Micro's Signal ops (the micro_speech audio front end), bit exact
    "SignalDelay": Op("signal.tflm_buffers:delay"),
    "SignalEnergy": Op("signal.tflm_frontend:energy"),
    "SignalFftAutoScale": Op("signal.tflm_frontend:fft_auto_scale"),
    "SignalFilterBank": Op("signal.tflm_frontend:filter_bank"),
    "SignalFilterBankLog": Op("signal.tflm_frontend:filter_bank_log"),
    "SignalFilterBankSpectralSubtraction": Op("signal.tflm_frontend:spectral_subtraction"),
    "SignalFilterBankSquareRoot": Op("signal.tflm_frontend:filter_bank_square_root"),
    "SignalFramer": Op("signal.tflm_buffers:framer"),
    "SignalIrfft": Op("signal.tflm_fft:irfft"),
    "SignalOverlapAdd": Op("signal.tflm_buffers:overlap_add"),
    "SignalPCAN": Op("signal.tflm_frontend:pcan"),
    "SignalRfft": Op("signal.tflm_fft:rfft"),
    "SignalStacker": Op("signal.tflm_buffers:stacker"),
    "SignalWindow": Op("signal.tflm_frontend:window"),
    "TFLite_Detection_PostProcess": Op(
        "detection.postprocess:detection_postprocess", int8=DEQUANTIZES
    ),
    "TransformLandmarks": Op("detection.mediapipe_transform:transform_landmarks"),
    "TransformTensorBilinear": Op("detection.mediapipe_transform:transform_tensor_bilinear"),
}
